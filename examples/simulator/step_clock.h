// Times the simulator's calls into kvcache (the "bookkeeping" of a
// scheduling step): per step, the wall time (steady clock) and this
// thread's CPU time spent in them; with --profile, every call by kind.
//
// What is kept out: the scheduler opens a segment only around cache calls
// (the prompt's tokens are built, and its own queues updated, outside), and
// the KV kernels are timed apart (kernel time). A CPU-time reading costs a
// system call (microseconds on a VM, where the vDSO serves only the wall
// clocks), so the CPU time is read per segment, not per call, and the cost
// of one reading, measured at start, is taken off each segment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sim {

enum class CallKind : uint8_t {
  kAdd, kProbe, kExtend, kCommit, kRemove, kTables, kPublish, kCount
};
const char *call_kind_name(CallKind kind);

// p50, p99, p99.9 and max of a set of samples, in microseconds.
struct Spread {
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
};
Spread spread_us(std::vector<double> seconds);

// One kind of call, over the whole run (--profile).
struct CallProfile {
  std::string kind;
  uint64_t calls = 0;
  double total_s = 0;
  Spread per_call;  // us
  // Share of this kind in the calls' time of the slowest 1% of steps (by
  // the steps' wall time): what bounds the p99 step.
  double slow_share = 0;
};

class StepClock {
 public:
  explicit StepClock(bool profile);

  // A segment of cache calls. Segments of one step add up.
  void start();
  void stop();
  // Times one call of `kind` inside a segment (wall clock, only when
  // profiling): `f()` is the call.
  template <class F>
  auto call(CallKind kind, F &&f) -> decltype(f()) {
    if (!profile_) return f();
    const double t0 = wall_now();
    struct Done {
      StepClock &clock;
      CallKind kind;
      double t0;
      ~Done() { clock.record(kind, wall_now() - t0); }
    } done{*this, kind, t0};
    return f();
  }
  // Closes the step: its wall and CPU totals join the samples.
  void end_step();

  Spread wall() const { return spread_us(step_wall_); }
  Spread cpu() const { return spread_us(step_cpu_); }
  double cpu_reading_cost_us() const { return 1e6 * cpu_reading_s_; }
  std::vector<CallProfile> profile() const;

 private:
  static double wall_now();
  static double cpu_now();
  void record(CallKind kind, double seconds);

  bool profile_;
  double cpu_reading_s_ = 0;  // one CPU-clock reading, taken off each segment
  double wall0_ = 0, cpu0_ = 0;
  double step_wall_s_ = 0, step_cpu_s_ = 0;
  std::vector<double> step_wall_, step_cpu_;
  std::vector<std::vector<double>> calls_;  // per kind, when profiling
  std::vector<double> step_kinds_s_;        // this step's time per kind (profiling)
  std::vector<std::vector<double>> kinds_by_step_;  // per step, per kind (profiling)
};

}  // namespace sim
