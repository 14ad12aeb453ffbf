#include "step_clock.h"

#include <time.h>

#include <algorithm>
#include <cmath>

namespace sim {

const char *call_kind_name(CallKind kind) {
  switch (kind) {
    case CallKind::kAdd: return "add";
    case CallKind::kProbe: return "probe (add's dry run)";
    case CallKind::kExtend: return "extend (decode step)";
    case CallKind::kCommit: return "commit";
    case CallKind::kPublish: return "publish";
    case CallKind::kRemove: return "remove";
    case CallKind::kTables: return "tables (slots, block tables)";
    case CallKind::kCount: break;
  }
  return "?";
}

namespace {

double rank(const std::vector<double> &sorted, double p) {
  size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  k = std::min(sorted.size() - 1, k ? k - 1 : 0);
  return sorted[k];
}

double seconds_of(const timespec &t) { return double(t.tv_sec) + 1e-9 * double(t.tv_nsec); }

}  // namespace

Spread spread_us(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.p50 = 1e6 * rank(v, 0.50);
  s.p99 = 1e6 * rank(v, 0.99);
  s.p999 = 1e6 * rank(v, 0.999);
  s.max = 1e6 * v.back();
  return s;
}

double StepClock::wall_now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return seconds_of(t);
}

double StepClock::cpu_now() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return seconds_of(t);
}

StepClock::StepClock(bool profile)
    : profile_(profile),
      calls_(profile ? size_t(CallKind::kCount) : 0),
      step_kinds_s_(profile ? size_t(CallKind::kCount) : 0, 0.0) {
  // The median of back-to-back readings: what one reading adds to a segment.
  std::vector<double> d(101);
  for (double &x : d) {
    const double a = cpu_now();
    x = cpu_now() - a;
  }
  std::nth_element(d.begin(), d.begin() + 50, d.end());
  cpu_reading_s_ = d[50];
}

// The wall clock read inside the CPU readings: the segment's wall time
// holds no CPU reading, its CPU time one reading's cost (taken off).
void StepClock::start() {
  cpu0_ = cpu_now();
  wall0_ = wall_now();
}

void StepClock::stop() {
  const double wall = wall_now();
  const double cpu = cpu_now();
  step_cpu_s_ += std::max(0.0, cpu - cpu0_ - cpu_reading_s_);
  step_wall_s_ += wall - wall0_;
}

void StepClock::end_step() {
  step_wall_.push_back(step_wall_s_);
  step_cpu_.push_back(step_cpu_s_);
  step_wall_s_ = step_cpu_s_ = 0;
  if (!profile_) return;
  kinds_by_step_.push_back(step_kinds_s_);
  std::fill(step_kinds_s_.begin(), step_kinds_s_.end(), 0.0);
}

void StepClock::record(CallKind kind, double seconds) {
  calls_[size_t(kind)].push_back(seconds);
  step_kinds_s_[size_t(kind)] += seconds;
}

std::vector<CallProfile> StepClock::profile() const {
  // The slowest 1% of steps (at least one): each kind's time in them.
  std::vector<double> slow(calls_.size(), 0.0);
  double slow_all = 0;
  if (!step_wall_.empty()) {
    std::vector<size_t> order(step_wall_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    const size_t n = std::max<size_t>(1, order.size() / 100);
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(n), order.end(),
                      [&](size_t a, size_t b) { return step_wall_[a] > step_wall_[b]; });
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < slow.size(); ++k) {
        slow[k] += kinds_by_step_[order[i]][k];
        slow_all += kinds_by_step_[order[i]][k];
      }
  }
  std::vector<CallProfile> out;
  for (size_t k = 0; k < calls_.size(); ++k) {
    if (calls_[k].empty()) continue;
    CallProfile p;
    p.kind = call_kind_name(CallKind(k));
    p.calls = calls_[k].size();
    for (double s : calls_[k]) p.total_s += s;
    p.per_call = spread_us(calls_[k]);
    p.slow_share = slow_all > 0 ? slow[k] / slow_all : 0.0;
    out.push_back(p);
  }
  return out;
}

}  // namespace sim
