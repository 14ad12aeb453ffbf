// A fixed-size array allocated once, for the cache manager's large indexes
// (tree nodes and lookup records, hash table slots, eviction links, block
// states): millions of entries read at random by lookups and evictions.
// Arrays of 2 MiB or more are aligned to 2 MiB and, on Linux, marked for
// transparent huge pages (madvise; the system may decline), since with
// 4 KiB pages nearly every random access would also miss the TLB. Smaller
// arrays are aligned to a cache line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kvc {

template <class T>
class BigArray {
 public:
  BigArray() = default;
  // `n` value-initialized elements.
  explicit BigArray(size_t n) : BigArray(n, [](T* p) { new (p) T(); }, 0) {}
  // `n` copies of `value`.
  BigArray(size_t n, const T& value) : BigArray(n, [&value](T* p) { new (p) T(value); }, 0) {}
  BigArray(BigArray&& o) noexcept { swap(o); }
  BigArray& operator=(BigArray&& o) noexcept {
    BigArray(std::move(o)).swap(*this);
    return *this;
  }
  BigArray(const BigArray&) = delete;
  BigArray& operator=(const BigArray&) = delete;
  ~BigArray() { release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

 private:
  static constexpr size_t kHuge = size_t(2) << 20;
  template <class Make>
  BigArray(size_t n, Make make, int) {
    if (n == 0) return;
    const size_t bytes = n * sizeof(T);
    const bool huge = bytes >= kHuge;
    align_ = huge ? kHuge : (alignof(T) > 64 ? alignof(T) : 64);
    bytes_ = huge ? (bytes + kHuge - 1) / kHuge * kHuge : bytes;
    void* p = ::operator new(bytes_, std::align_val_t(align_));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) (void)madvise(p, bytes_, MADV_HUGEPAGE);  // a hint: failure is fine
#endif
    data_ = static_cast<T*>(p);
    size_t i = 0;
    try {
      for (; i < n; ++i) make(data_ + i);
    } catch (...) {
      size_ = i;
      release();
      throw;
    }
    size_ = n;
  }
  void swap(BigArray& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(bytes_, o.bytes_);
    std::swap(align_, o.align_);
  }
  void release() {
    if (data_ == nullptr) return;
    for (size_t i = size_; i > 0; --i) data_[i - 1].~T();
    ::operator delete(data_, std::align_val_t(align_));
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
  size_t bytes_ = 0;
  size_t align_ = 64;
};

}  // namespace kvc
