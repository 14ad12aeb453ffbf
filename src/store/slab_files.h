// The slab files of the disk tier (disk_store.h): fixed-size slots, one
// record each, in a few large files under the store's directory. This class
// owns the files (names, descriptors, sizes, growth) and the I/O on slots;
// which record lives in which slot is the DiskStore's business.
//
// Geometry. Slot s lives in slab s / slots_per_slab() at byte offset
// (s % slots_per_slab()) * slot_bytes. A slab holds up to 1 GiB of whole
// slots (at least one), so a 100 GiB budget is about 100 files. The slot
// size is the record size of one geometry (its fingerprint is in the file
// name: `<fingerprint>-<slab number>.slab`, 16 and 4 hex digits), so the
// positions never change for the files of that name.
//
// Growth. Slabs are created and grown by the writer, in steps of 64 MiB of
// whole slots (fallocate, ftruncate where the file system has no fallocate),
// never past the store's slot budget: the bytes on disk stay within the
// budget rounded up to a step.
//
// Threads. The descriptors are opened at construction (existing slabs) or by
// the one writer thread (reserve()) and closed only by the destructor, so
// read() may run on any thread while the writer grows the files. All I/O is
// pread/pwrite at slot offsets, no shared file position.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kvc {

class SlabFiles {
 public:
  static constexpr uint64_t kSlabBytes = uint64_t(1) << 30;
  static constexpr uint64_t kGrowBytes = uint64_t(64) << 20;

  // Opens the existing slabs of `fingerprint` under `dir` for slots of
  // `slot_bytes`, with room for `max_slots` slots (and any slab already on
  // disk beyond them, until shrink()). Throws Error(KVC_ERR_INVALID_ARGUMENT)
  // naming the file that cannot be opened.
  // `slab_bytes` 0: kSlabBytes.
  SlabFiles(std::string dir, uint64_t fingerprint, size_t slot_bytes, uint64_t max_slots,
            uint64_t slab_bytes = 0);
  ~SlabFiles();
  SlabFiles(const SlabFiles&) = delete;
  SlabFiles& operator=(const SlabFiles&) = delete;

  uint64_t slots_per_slab() const { return slots_per_slab_; }
  size_t slot_bytes() const { return slot_bytes_; }
  std::string path(uint64_t slab) const;
  uint64_t offset_of(uint64_t slot) const { return (slot % slots_per_slab_) * slot_bytes_; }

  // Calls visit(slot, bytes, size) for every slot of the existing slabs with
  // the first min(size of the slot on disk, head_bytes) bytes of it: a slot
  // cut short by the end of its file has size < slot_bytes (a torn file).
  void scan(size_t head_bytes,
            const std::function<void(uint64_t, const unsigned char*, size_t)>& visit) const;

  // The writer: makes slot's slab exist and be allocated through the slot's
  // end. Returns 0 or an errno (ENOSPC: the disk is full).
  int reserve(uint64_t slot);
  // Writes `n` records (slot_bytes each) into slots first..first+n-1 of one
  // slab (the caller keeps runs within a slab). Returns 0 or an errno.
  int write(uint64_t first, const unsigned char* const* records, size_t n);
  // Reads slots first..first+n-1 of one slab into out[0..n). Returns 0 or an
  // errno (EIO: the file ends before the last slot).
  // With `sums`: reads the run in windows of kHashWindow bytes (one preadv
  // each) and hashes each window's bytes right after its read, while they
  // are in the CPU's cache; sums[i] is the record checksum (block_record.h)
  // of out[i]'s slot_bytes(). Records of sums[0..i) are complete when a read
  // fails.
  int read(uint64_t first, unsigned char* const* out, size_t n, uint64_t* sums = nullptr) const;
  static constexpr uint64_t kHashWindow = uint64_t(256) << 10;
  // Zeroes the first 8 bytes (a record's magic) of `slot`: it no longer
  // parses as a record. Returns 0 or an errno.
  int invalidate(uint64_t slot);

  // At open, before any writer: removes the slabs and the bytes past `slots`.
  void shrink(uint64_t slots);

 private:
  int fd_of(uint64_t slab) const { return fds_[slab].load(std::memory_order_acquire); }

  const std::string dir_;
  const std::string prefix_;  // "<fingerprint>-"
  const size_t slot_bytes_;
  const uint64_t slots_per_slab_;
  const uint64_t max_slots_;
  // One per slab that may exist; -1 while not open. Set once (construction or
  // the writer), read by any thread.
  std::unique_ptr<std::atomic<int>[]> fds_;
  uint64_t num_slabs_ = 0;
  std::vector<uint64_t> allocated_;  // the writer's: bytes allocated per slab
};

}  // namespace kvc
