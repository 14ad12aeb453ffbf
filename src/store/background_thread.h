// The stores' own threads (the record writer's, the disk's worker) run as
// background work: on Linux, SCHED_BATCH (no privilege needed, same nice
// value, so never starved). A batch thread that wakes up does not preempt
// the thread running on its CPU: without it, a commit that wakes the writer
// (or a put that wakes the disk's worker) could hand the serving thread's
// CPU to the writer for the writer's whole batch, tens of microseconds of
// wall time on a call whose own CPU time is a few
// (bench/results/2026-11-28-disk-serving-vm-2cpu.md). Elsewhere, or where
// the call fails, the thread keeps its policy.
#pragma once

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace kvc {

inline void run_as_background_thread() noexcept {
#if defined(__linux__) && defined(SCHED_BATCH)
  sched_param p{};
  p.sched_priority = 0;
  (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &p);  // best effort
#endif
}

}  // namespace kvc
