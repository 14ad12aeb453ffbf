// Work the core runs off the serving call, on a thread of the store layer
// (the core starts no thread: the queue is defined beside the stores,
// src/store/background_tasks.cpp). Tasks run one at a time, in the order
// posted; the serving thread learns which are done from one counter.
// Used for the offers a device cache copies out at eviction: the call
// enqueues the device copies into pinned staging and posts a task that
// waits for them (Device::wait_fence), seals the records and puts them
// into the stores (store_chain.h, "Offload at eviction").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace kvc {

class BackgroundTasks {
 public:
  virtual ~BackgroundTasks() = default;
  // Queues `task` (it must not throw) and returns its number (1 for the
  // first posted). Takes a lock the worker holds only to take a task, and
  // wakes the worker; never waits for a task.
  virtual uint64_t post(std::function<void()> task) = 0;
  // The first done() tasks posted are done (an acquire load): what they
  // wrote is visible to the caller.
  virtual uint64_t done() const = 0;
  // Waits until done() >= n (n <= the tasks posted).
  virtual void wait_done(uint64_t n) = 0;
};

// One worker thread, run as background work (background_thread.h); the
// destructor runs the tasks posted before it, then joins the thread.
std::unique_ptr<BackgroundTasks> open_background_tasks();

}  // namespace kvc
