#pragma once
// SmallBuffer<T, N>: scratch for n elements, on the stack while n <= N and
// on the heap above; for per-call scratch whose size is usually small (a
// run of a few blocks) but has no fixed bound. Elements are value-initialized
// only when they come from the heap; the caller writes every one it reads.
#include <cstddef>
#include <memory>

namespace kvc {

template <typename T, size_t N>
class SmallBuffer {
 public:
  explicit SmallBuffer(size_t n) : data_(n <= N ? inline_ : (heap_ = std::make_unique<T[]>(n)).get()) {}
  SmallBuffer(const SmallBuffer&) = delete;
  SmallBuffer& operator=(const SmallBuffer&) = delete;

  T* data() { return data_; }
  T& operator[](size_t i) { return data_[i]; }

 private:
  T inline_[N];
  std::unique_ptr<T[]> heap_;
  T* data_;
};

}  // namespace kvc
