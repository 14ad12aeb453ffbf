#include "store/slab_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "base/hex.h"
#include "base/small_buffer.h"
#include "core/block_record.h"

namespace kvc {

namespace {

constexpr size_t kMaxIov = IOV_MAX < 1024 ? IOV_MAX : 1024;

bool parse_hex(const char* s, size_t n, uint64_t* out) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = s[i];
    uint64_t d;
    if (c >= '0' && c <= '9') d = uint64_t(c - '0');
    else if (c >= 'a' && c <= 'f') d = uint64_t(c - 'a' + 10);
    else return false;
    v = v << 4 | d;
  }
  *out = v;
  return true;
}

// pwritev/preadv of whole iovecs at `offset`, resuming after short transfers.
// Returns 0 or an errno (EIO for a read past the end of the file).
int transfer(bool write, int fd, iovec* iov, size_t n, uint64_t offset) {
  while (n > 0) {
    const size_t batch = std::min(n, kMaxIov);
    const ssize_t r = write ? ::pwritev(fd, iov, int(batch), off_t(offset))
                            : ::preadv(fd, iov, int(batch), off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    if (r == 0) return write ? ENOSPC : EIO;
    offset += uint64_t(r);
    size_t done = size_t(r);
    while (n > 0 && done >= iov->iov_len) {
      done -= iov->iov_len;
      ++iov;
      --n;
    }
    if (n > 0 && done > 0) {
      iov->iov_base = static_cast<unsigned char*>(iov->iov_base) + done;
      iov->iov_len -= done;
    }
  }
  return 0;
}

}  // namespace

SlabFiles::SlabFiles(std::string dir, uint64_t fingerprint, size_t slot_bytes, uint64_t max_slots,
                     uint64_t slab_bytes)
    : dir_(std::move(dir)),
      prefix_(hex16(fingerprint) + "-"),
      slot_bytes_(slot_bytes),
      slots_per_slab_(std::max<uint64_t>(1, (slab_bytes != 0 ? slab_bytes : kSlabBytes) / slot_bytes)),
      max_slots_(max_slots) {
  num_slabs_ = (max_slots_ + slots_per_slab_ - 1) / slots_per_slab_;
  // Slabs already on disk, possibly past this budget (a larger one before).
  std::vector<uint64_t> existing;
  if (DIR* d = ::opendir(dir_.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      uint64_t slab = 0;
      if (name.size() == prefix_.size() + 4 + 5 && name.compare(0, prefix_.size(), prefix_) == 0 &&
          name.compare(name.size() - 5, 5, ".slab") == 0 &&
          parse_hex(name.c_str() + prefix_.size(), 4, &slab)) {
        existing.push_back(slab);
        num_slabs_ = std::max(num_slabs_, slab + 1);
      }
    }
    ::closedir(d);
  }
  fds_.reset(new std::atomic<int>[num_slabs_]);
  for (uint64_t i = 0; i < num_slabs_; ++i) fds_[i].store(-1);
  allocated_.assign(num_slabs_, 0);
  for (uint64_t slab : existing) {
    const std::string p = path(slab);
    const int fd = ::open(p.c_str(), O_RDWR | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0) {
      const int e = errno;
      if (fd >= 0) ::close(fd);
      for (uint64_t i = 0; i < num_slabs_; ++i)
        if (fd_of(i) >= 0) ::close(fd_of(i));
      invalid_argument("disk cache file '" + p + "' cannot be opened: " + std::strerror(e));
    }
    fds_[slab].store(fd);
    allocated_[slab] = uint64_t(st.st_size);
  }
}

SlabFiles::~SlabFiles() {
  for (uint64_t i = 0; i < num_slabs_; ++i)
    if (fd_of(i) >= 0) ::close(fd_of(i));
}

std::string SlabFiles::path(uint64_t slab) const {
  return dir_ + "/" + prefix_ + hex_digits(slab, 4) + ".slab";
}

void SlabFiles::scan(size_t head_bytes,
                     const std::function<void(uint64_t, const unsigned char*, size_t)>& visit) const {
  std::vector<unsigned char> head(head_bytes);
  for (uint64_t slab = 0; slab < num_slabs_; ++slab) {
    const int fd = fd_of(slab);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) != 0) continue;
    const uint64_t size = uint64_t(st.st_size);
    for (uint64_t k = 0; k < slots_per_slab_ && k * slot_bytes_ < size; ++k) {
      const uint64_t on_disk = std::min<uint64_t>(slot_bytes_, size - k * slot_bytes_);
      const size_t want = size_t(std::min<uint64_t>(head_bytes, on_disk));
      iovec v{head.data(), want};
      if (transfer(false, fd, &v, 1, k * slot_bytes_) != 0) continue;
      visit(slab * slots_per_slab_ + k, head.data(), size_t(on_disk));
    }
  }
}

int SlabFiles::reserve(uint64_t slot) {
  const uint64_t slab = slot / slots_per_slab_;
  const uint64_t end = offset_of(slot) + slot_bytes_;
  if (slab >= num_slabs_) return EINVAL;  // past the budget: a caller's bug
  if (end <= allocated_[slab]) return 0;
  int fd = fd_of(slab);
  if (fd < 0) {
    fd = ::open(path(slab).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return errno;
    fds_[slab].store(fd, std::memory_order_release);
  }
  // Up to the next step, the end of the slab or of the budget, whichever
  // comes first; whole slots.
  const uint64_t slab_slots = std::min(slots_per_slab_, max_slots_ - slab * slots_per_slab_);
  const uint64_t step = std::max<uint64_t>(1, kGrowBytes / slot_bytes_) * slot_bytes_;
  const uint64_t target =
      std::max(end, std::min(slab_slots * slot_bytes_, (end + step - 1) / step * step));
  if (::fallocate(fd, 0, off_t(allocated_[slab]), off_t(target - allocated_[slab])) != 0) {
    const int e = errno;
    if (e != EOPNOTSUPP && e != ENOSYS) return e;
    if (::ftruncate(fd, off_t(target)) != 0) return errno;
  }
  allocated_[slab] = target;
  return 0;
}

int SlabFiles::write(uint64_t first, const unsigned char* const* records, size_t n) {
  const int fd = fd_of(first / slots_per_slab_);
  if (fd < 0) return EBADF;
  SmallBuffer<iovec, 16> iov(n);
  for (size_t i = 0; i < n; ++i) iov[i] = iovec{const_cast<unsigned char*>(records[i]), slot_bytes_};
  return transfer(true, fd, iov.data(), n, offset_of(first));
}

int SlabFiles::read(uint64_t first, unsigned char* const* out, size_t n, uint64_t* sums) const {
  const uint64_t slab = first / slots_per_slab_;
  const int fd = slab < num_slabs_ ? fd_of(slab) : -1;
  if (fd < 0) return EIO;
  if (sums == nullptr) {
    SmallBuffer<iovec, 16> iov(n);
    for (size_t i = 0; i < n; ++i) iov[i] = iovec{out[i], slot_bytes_};
    return transfer(false, fd, iov.data(), n, offset_of(first));
  }
  // Windows of the run's bytes [at, end): up to kHashWindow bytes and
  // kWindowIov pieces (a piece: the part of one record in the window).
  constexpr size_t kWindowIov = 64;
  const uint64_t total = uint64_t(n) * slot_bytes_;
  const uint64_t base = offset_of(first);
  RecordChecksum sum;
  iovec iov[kWindowIov];
  for (uint64_t at = 0; at < total;) {
    size_t pieces = 0;
    uint64_t end = at;
    const uint64_t limit = std::min(total, at + kHashWindow);
    while (end < limit && pieces < kWindowIov) {
      const uint64_t rec = end / slot_bytes_, off = end % slot_bytes_;
      const uint64_t len = std::min<uint64_t>(slot_bytes_ - off, limit - end);
      iov[pieces++] = iovec{out[rec] + off, size_t(len)};
      end += len;
    }
    const int err = transfer(false, fd, iov, pieces, base + at);
    if (err != 0) return err;
    // The same pieces again (transfer() moved the iovecs), now in cache.
    while (at < end) {
      const uint64_t rec = at / slot_bytes_, off = at % slot_bytes_;
      const uint64_t len = std::min<uint64_t>(slot_bytes_ - off, end - at);
      sum.update(out[rec] + off, size_t(len));
      at += len;
      if (off + len == slot_bytes_) {
        sums[rec] = sum.digest();
        sum.reset();
      }
    }
  }
  return 0;
}

int SlabFiles::invalidate(uint64_t slot) {
  const int fd = fd_of(slot / slots_per_slab_);
  if (fd < 0) return EBADF;
  unsigned char zero[8] = {};
  iovec v{zero, sizeof zero};
  return transfer(true, fd, &v, 1, offset_of(slot));
}

void SlabFiles::shrink(uint64_t slots) {
  for (uint64_t slab = 0; slab < num_slabs_; ++slab) {
    const uint64_t first = slab * slots_per_slab_;
    const int fd = fd_of(slab);
    if (fd < 0) continue;
    if (first >= slots) {
      ::close(fd);
      fds_[slab].store(-1);
      allocated_[slab] = 0;
      ::unlink(path(slab).c_str());
    } else if (first + slots_per_slab_ > slots) {
      const uint64_t keep = (slots - first) * slot_bytes_;
      if (allocated_[slab] > keep && ::ftruncate(fd, off_t(keep)) == 0) allocated_[slab] = keep;
    }
  }
}

}  // namespace kvc
