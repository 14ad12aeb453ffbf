#include "store/disk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "base/error.h"

namespace kvc {

namespace {

constexpr uint64_t kDefaultQueueBytes = uint64_t(64) << 20;

std::string hex16(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016" PRIx64, v);
  return b;
}

bool parse_hex16(const char* s, uint64_t* out) {
  uint64_t v = 0;
  for (int i = 0; i < 16; ++i) {
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

// Reads exactly `size` bytes at offset 0; false on error or a short file
// (*error: errno, EIO for a short file).
bool read_exact(int fd, unsigned char* out, size_t size, int* error) {
  size_t done = 0;
  while (done < size) {
    const ssize_t r = ::pread(fd, out + done, size - done, static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      *error = r < 0 ? errno : EIO;
      return false;
    }
    done += static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const unsigned char* p, size_t size, int* error) {
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::write(fd, p + done, size - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *error = w < 0 ? errno : ENOSPC;
      return false;
    }
    done += static_cast<size_t>(w);
  }
  return true;
}

uint32_t queue_capacity(const DiskStoreOptions& o, size_t record_bytes) {
  if (o.queue_records != 0) return o.queue_records;
  const uint64_t fit = kDefaultQueueBytes / record_bytes;
  return static_cast<uint32_t>(std::max<uint64_t>(2, std::min<uint64_t>(fit, 1u << 16)));
}

}  // namespace

DiskStore::DiskStore(const std::string& directory, uint64_t capacity_bytes,
                     const RecordLayout& layout, DiskStoreOptions options)
    : dir_(directory),
      layout_(layout),
      capacity_bytes_(capacity_bytes),
      max_records_(capacity_bytes / layout.record_bytes()),
      queue_capacity_(queue_capacity(options, layout.record_bytes())),
      options_(std::move(options)),
      prefix_(hex16(layout.fingerprint) + "-") {
  if (dir_.empty()) invalid_argument("disk cache directory must not be empty");
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0)
    invalid_argument("disk cache directory '" + dir_ + "' cannot be used: " +
                     std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    invalid_argument("disk cache directory '" + dir_ + "' is not a directory");
  if (max_records_ == 0)
    invalid_argument("disk cache bytes " + std::to_string(capacity_bytes) +
                     " is below one block record (" + std::to_string(layout.record_bytes()) +
                     " bytes for this model's geometry)");
  const std::string lock = dir_ + "/.kvc-" + hex16(layout.fingerprint) + ".lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0)
    invalid_argument("disk cache directory '" + dir_ + "' is not writable: " +
                     std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(lock_fd_);
    invalid_argument("disk cache directory '" + dir_ +
                     "' is in use by another cache of this geometry (" + lock + ": " +
                     std::strerror(e) + ")");
  }
  // A probe write: a directory the lock file already existed in may still be
  // read-only (a read-only mount).
  const std::string probe = dir_ + "/.tmp-" + hex16(layout.fingerprint) + "-probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    ::close(lock_fd_);
    invalid_argument("disk cache directory '" + dir_ + "' is not writable: " + std::strerror(e));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  counters_.capacity_bytes = capacity_bytes_;
  open_index();
  worker_ = std::thread([this] { worker(); });
}

DiskStore::~DiskStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
  ::close(lock_fd_);  // releases the flock
}

std::string DiskStore::path_of(uint64_t hash) const {
  return dir_ + "/" + prefix_ + hex16(hash) + ".kvb";
}

void DiskStore::open_index() {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr)
    invalid_argument("disk cache directory '" + dir_ + "' cannot be listed: " +
                     std::strerror(errno));
  struct Found {
    uint64_t hash;
    uint32_t priority;
    int64_t mtime_ns;
  };
  std::vector<Found> found;
  std::vector<std::string> remove;
  const std::string tmp_prefix = ".tmp-" + hex16(layout_.fingerprint) + "-";
  std::vector<unsigned char> head(kRecordFixedHeader);
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, tmp_prefix.size(), tmp_prefix) == 0) {
      remove.push_back(name);  // a write that never finished
      continue;
    }
    if (name.size() != prefix_.size() + 16 + 4 || name.compare(0, prefix_.size(), prefix_) != 0 ||
        name.compare(name.size() - 4, 4, ".kvb") != 0)
      continue;  // not ours
    uint64_t hash = 0;
    if (!parse_hex16(name.c_str() + prefix_.size(), &hash)) continue;
    const std::string path = dir_ + "/" + name;
    bool sound = false;
    struct stat st {};
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      int err = 0;
      if (::fstat(fd, &st) == 0 && uint64_t(st.st_size) == layout_.record_bytes() &&
          read_exact(fd, head.data(), head.size(), &err)) {
        const RecordHeader h = read_record_header(head.data());
        sound = h.magic_ok && h.version == kRecordVersion &&
                h.fingerprint == layout_.fingerprint && h.lookup_hash == hash &&
                h.header_bytes == layout_.header_bytes() &&
                h.payload_bytes == layout_.payload_bytes &&
                h.num_tokens == layout_.tokens_per_block;
        if (sound)
          found.push_back(Found{hash, std::min<uint32_t>(h.priority, 100),
                                int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
      }
      ::close(fd);
    }
    if (!sound) {
      remove.push_back(name);  // torn (a power loss) or not a record
      ++counters_.rejected;
    }
  }
  ::closedir(d);
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.hash < b.hash;
  });
  for (const Found& f : found) {
    index_[f.hash] = Entry{f.priority, ++clock_};
    lru_.emplace(f.priority, clock_, f.hash);
  }
  // A smaller budget than last time: the lowest go.
  while (index_.size() > max_records_) {
    const uint64_t hash = std::get<2>(*lru_.begin());
    forget_locked(hash);
    remove.push_back(prefix_ + hex16(hash) + ".kvb");
    ++counters_.evictions;
  }
  for (const std::string& name : remove) ::unlink((dir_ + "/" + name).c_str());
}

void DiskStore::forget_locked(uint64_t hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return;
  lru_.erase(LruKey{it->second.priority, it->second.age, hash});
  index_.erase(it);
}

bool DiskStore::put(uint64_t hash, uint32_t priority, const unsigned char* record) {
  const size_t size = layout_.record_bytes();
  std::unique_ptr<unsigned char[]> buf;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= queue_capacity_ || stop_) {
      ++counters_.drops;
      return false;
    }
    if (!spare_.empty()) {
      buf = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  // The copy runs outside the lock (the worker keeps writing meanwhile);
  // the queue can only have shrunk since.
  if (!buf) buf.reset(new unsigned char[size]);
  std::memcpy(buf.get(), record, size);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_[hash] = buf.get();
    queue_.push_back(Item{hash, std::min<uint32_t>(priority, 100), std::move(buf)});
    ++enqueued_;
    wake = worker_waiting_;
  }
  if (wake) work_cv_.notify_one();
  return true;
}

size_t DiskStore::load(const uint64_t* hashes, size_t n, unsigned char* const* out) {
  const auto start = std::chrono::steady_clock::now();
  const size_t size = layout_.record_bytes();
  size_t got = 0;
  for (; got < n; ++got) {
    const uint64_t hash = hashes[got];
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto p = pending_.find(hash);
      if (p != pending_.end()) {  // still queued: the newest put
        std::memcpy(out[got], p->second, size);
        ++counters_.hits;
        continue;
      }
      if (index_.find(hash) == index_.end()) {
        ++counters_.misses;
        break;
      }
    }
    const std::string path = path_of(hash);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    bool ok = false;
    int err = 0;
    if (fd >= 0) {
      ok = read_exact(fd, out[got], size, &err);
      ::close(fd);
    } else {
      err = errno;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(hash);
    if (!ok) {
      // Evicted meanwhile or removed by someone else (a miss), or unreadable
      // (an error); an entry still indexed names a file that is gone or bad.
      if (err == ENOENT) ++counters_.misses;
      else ++counters_.errors;
      if (it != index_.end() && pending_.count(hash) == 0) forget_locked(hash);
      break;
    }
    ++counters_.hits;
    if (it != index_.end()) {  // refresh its recency
      lru_.erase(LruKey{it->second.priority, it->second.age, hash});
      it->second.age = ++clock_;
      lru_.emplace(it->second.priority, it->second.age, hash);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  load_latency_.add(micros_since(start));
  return got;
}

void DiskStore::reject(uint64_t hash, RecordCheck) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.rejected;
    if (pending_.count(hash) != 0) return;  // a newer record is on its way
    if (index_.find(hash) == index_.end()) return;
    forget_locked(hash);
  }
  ::unlink(path_of(hash).c_str());
}

void DiskStore::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  done_cv_.wait(lock, [&] { return finished_ >= target; });
}

StoreStats DiskStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  StoreStats s = counters_;
  s.blocks = index_.size();
  s.bytes = index_.size() * layout_.record_bytes();
  s.queued = queue_.size();
  s.load = load_latency_.summary();
  s.write = write_latency_.summary();
  return s;
}

bool DiskStore::write_file(const Item& item, int* error) {
  if (options_.write_fault) {
    *error = options_.write_fault(item.hash);
    if (*error != 0) return false;
  }
  const std::string tmp = dir_ + "/.tmp-" + prefix_ + hex16(item.hash);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = errno;
    return false;
  }
  bool ok = write_all(fd, item.bytes.get(), layout_.record_bytes(), error);
  if (::close(fd) != 0 && ok) {
    *error = errno;
    ok = false;
  }
  if (ok && ::rename(tmp.c_str(), path_of(item.hash).c_str()) != 0) {
    *error = errno;
    ok = false;
  }
  if (!ok) ::unlink(tmp.c_str());
  return ok;
}

void DiskStore::worker() {
  std::vector<uint64_t> victims;
  for (;;) {
    Item item;
    victims.clear();
    {
      std::unique_lock<std::mutex> lock(mu_);
      worker_waiting_ = true;
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      worker_waiting_ = false;
      if (queue_.empty()) return;  // stopping, everything written
      item = std::move(queue_.front());
      queue_.pop_front();
      // Room first: a record replaced leaves its slot; else the lowest
      // (priority, age) records go.
      forget_locked(item.hash);
      while (index_.size() + 1 > max_records_) {
        const uint64_t v = std::get<2>(*lru_.begin());
        forget_locked(v);
        victims.push_back(v);
        ++counters_.evictions;
      }
    }
    for (uint64_t v : victims) ::unlink(path_of(v).c_str());
    const auto start = std::chrono::steady_clock::now();
    int error = 0;
    const bool ok = write_file(item, &error);
    std::lock_guard<std::mutex> lock(mu_);
    if (ok) {
      forget_locked(item.hash);  // a racing reject() may not have seen the new file
      index_[item.hash] = Entry{item.priority, ++clock_};
      lru_.emplace(item.priority, clock_, item.hash);
      ++counters_.stores;
      write_latency_.add(micros_since(start));
    } else {
      ++counters_.drops;
      ++counters_.errors;
    }
    auto p = pending_.find(item.hash);
    if (p != pending_.end() && p->second == item.bytes.get()) pending_.erase(p);
    if (spare_.size() < queue_capacity_) spare_.push_back(std::move(item.bytes));
    ++finished_;
    done_cv_.notify_all();
  }
}

}  // namespace kvc
