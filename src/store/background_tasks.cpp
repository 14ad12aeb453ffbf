// BackgroundTasks (core/block_store.h): one worker thread and a queue
// of tasks under a mutex. A post is a lock, a push and a notify; the
// worker publishes how many tasks it finished with a release store, and
// wakes waiters when there are any.
#include "core/block_store.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "store/background_thread.h"

namespace kvc {

namespace {

class ThreadTasks final : public BackgroundTasks {
 public:
  ThreadTasks() : worker_([this] { run(); }) {}
  ~ThreadTasks() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    worker_.join();
  }
  ThreadTasks(const ThreadTasks&) = delete;
  ThreadTasks& operator=(const ThreadTasks&) = delete;

  uint64_t post(std::function<void()> task) override {
    uint64_t n;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(task));
      n = ++posted_;
    }
    work_cv_.notify_one();
    return n;
  }

  uint64_t done() const override { return done_.load(std::memory_order_acquire); }

  void wait_done(uint64_t n) override {
    if (done() >= n) return;
    std::unique_lock<std::mutex> lock(mu_);
    ++waiters_;
    done_cv_.wait(lock, [&] { return done() >= n; });
    --waiters_;
  }

 private:
  void run() {
    run_as_background_thread();
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, every task posted done
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      task();
      lock.lock();
      done_.fetch_add(1, std::memory_order_release);
      if (waiters_ > 0) done_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable work_cv_;  // the worker: a task posted, or stop
  std::condition_variable done_cv_;  // wait_done(): a task done
  std::deque<std::function<void()>> queue_;
  uint64_t posted_ = 0;
  int waiters_ = 0;
  bool stop_ = false;
  std::atomic<uint64_t> done_{0};
  std::thread worker_;  // last: starts after the members above exist
};

}  // namespace

std::unique_ptr<BackgroundTasks> open_background_tasks() { return std::make_unique<ThreadTasks>(); }

}  // namespace kvc
