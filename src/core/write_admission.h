// How many write-through jobs may be out at once (store_chain.h): the
// record writer's admission window, the serving thread's own state.
//
// Why: under a sustained overload (commits publish blocks faster than the
// disk takes them: large blocks, back-to-back steps) a queue as long as the
// writer's ring makes every job wait longer than its block stays cached.
// Eviction then reaches blocks whose jobs are not finished and must skip
// them (StoreChain::defer): they stay in the tree, deferred, until the
// writer gets to them. With 32 KiB blocks and a 1024-block pool, 146-255
// nodes were still deferred when a run ended (a fifth of the pool) and the
// serving calls' tree work was 600-1200 cycles slower; with the window,
// 0-56, and the disk was handed as many blocks
// (bench/results/2026-11-29-disk-serving-r10-admission-h200-host.md). The
// jobs the window turns away are dropped and counted at the commit, as a
// full ring's are.
//
// The rule (multiplicative decrease on the symptom, growth when the writer
// waits for work), no setting:
//  - a deferral is the writer behind eviction: the window becomes at most
//    half the jobs out (at least kMinJobs). Only once per cut: deferrals of
//    jobs submitted before the last cut were answered by it.
//  - a drain that finds every job finished while the window is below the
//    ring: the writer was idle, the window doubles (up to the ring).
// A writer that keeps up never defers, so the window stays the ring.
#pragma once

#include <algorithm>
#include <cstdint>

namespace kvc {

class WriteAdmission {
 public:
  // The window's floor: the writer keeps jobs queued behind the one it is
  // on, so it does not go to sleep between two commits.
  static constexpr uint64_t kMinJobs = 8;

  // ring: the writer's ring places (the window's ceiling and start).
  explicit WriteAdmission(uint64_t ring) : ring_(ring), window_(ring) {}

  uint64_t window() const { return window_; }
  // Jobs a commit may submit with `out` jobs out.
  uint64_t room(uint64_t out) const { return window_ > out ? window_ - out : 0; }
  // Eviction deferred a victim whose job `job` is not finished; `out` jobs
  // are out of `submitted`.
  void deferred(uint64_t job, uint64_t out, uint64_t submitted) {
    if (job <= cut_at_) return;  // queued before the last cut
    window_ = std::min(window_, std::max(kMinJobs, out / 2));
    cut_at_ = submitted;
    ++cuts_;
  }
  // A drain found no job out.
  void writer_idle() { window_ = std::min(ring_, 2 * window_); }
  // Tests: how many times the window was cut.
  uint64_t cuts() const { return cuts_; }

 private:
  uint64_t ring_;
  uint64_t window_;
  uint64_t cut_at_ = 0;  // jobs submitted at the last cut
  uint64_t cuts_ = 0;
};

}  // namespace kvc
