// The disk tier (issue 22), two questions, each answered by ratios against a
// peer measured in the same run (repetitions interleaved, median and range):
//
// 1. Throughput: the disk store (src/store/disk_store.h) writing and reading
//    block records, against plain I/O of the same payload bytes:
//      seq     one file written (read) sequentially, one write() (read())
//              per block: what `dd bs=<block>` does;
//      files   one file per block through the store's own system calls
//              (open, write, close, rename; open, pread, close) without the
//              header, checksum, queue or worker thread.
//    The store's write is timed from the first put to the last flush()
//    (default queue; the producer waits only when a put finds it full:
//    none is dropped and the queue's buffers are reused), two ways: "store", sealed records handed
//    over with put_buffer() (the record writer's way: the store queues the
//    buffer itself); "copy+write", each record first copied into the
//    buffer the last put handed back (what the record writer's seal copies;
//    seq has no such copy). seq and seqv write their file twice and time
//    the second pass, as the store's timed records follow a warm pass. Its
//    read is load() in runs of 16 blocks into 16 buffers (the readers of
//    the peers rotate 16 too), and load+check adds check_record() on every
//    record, as an add does. Target: store >= 0.70 x seq.
//    No fsync anywhere: all of them measure the file system and the page
//    cache of this machine alike (reads follow the writes: cached).
//
// 2. The serving path: p50/p99 of kvc_sequence_add, kvc_sequence_commit,
//    kvc_sequence_remove and of the three together, with the disk tier off
//    and on, wall time and the serving thread's CPU time, in a loop where every add evicts (unique
//    prompts through a full pool, no hit ever loads one). With the tier on,
//    each committed block is written through by the record writer's thread
//    (store_chain.h) and its eviction costs nothing more. Target: p99 on <=
//    1.10 x off.
//
//   bench_disk_tier [DIR] [REPETITIONS] [all|throughput|serving]
//   (DIR default $TMPDIR or /tmp; KVC_BENCH_ONLY_KIB=N: throughput of N KiB
//   blocks only; KVC_BENCH_PIN=1: serving thread on CPU 0, the tier's
//   threads on CPU 1)
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/block_record.h"
#include "kvcache/kvcache.h"
#include "store/disk_store.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string make_dir(const std::string& base) {
  std::string t = base + "/kvc-bench-disk-XXXXXX";
  std::vector<char> b(t.begin(), t.end());
  b.push_back('\0');
  if (::mkdtemp(b.data()) == nullptr) {
    std::perror("mkdtemp");
    std::exit(1);
  }
  return b.data();
}

void remove_dir(const std::string& dir) {
  const std::string cmd = "rm -rf '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
}

void must(bool ok, const char* what) {
  if (!ok) {
    std::perror(what);
    std::exit(1);
  }
}

struct Stat {
  double median = 0, lo = 0, hi = 0;
};
Stat stat_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// ---------------------------------------------------------------------------
// 1. Throughput
// ---------------------------------------------------------------------------

struct Records {
  kvc::RecordLayout layout;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<kvc::RecordKey> keys;
  std::vector<std::vector<unsigned char>> bytes;
};

Records make_records(uint64_t payload, uint32_t n) {
  Records r;
  r.layout.fingerprint = 0xbe7c4;
  r.layout.tokens_per_block = 16;
  r.layout.payload_bytes = payload;
  r.tokens.resize(n);
  r.keys.resize(n);
  r.bytes.resize(n);
  std::mt19937_64 rng(payload);
  kvc::ChainDigest parent{};
  for (uint32_t i = 0; i < n; ++i) {
    for (int t = 0; t < 16; ++t) r.tokens[i].push_back(int32_t(rng() % 128000));
    r.keys[i].lookup_hash = rng();
    r.keys[i].digest = kvc::block_chain_digest(parent, kvc::scope_chain_digest("S"),
                                               kvc::ChainDigest{}, r.tokens[i].data(), 16);
    parent = r.keys[i].digest;
    r.keys[i].tokens = r.tokens[i].data();
    r.bytes[i].resize(r.layout.record_bytes());
    unsigned char* p = r.bytes[i].data() + r.layout.header_bytes();
    for (uint64_t b = 0; b < payload; b += 8) {
      const uint64_t x = rng();
      std::memcpy(p + b, &x, std::min<uint64_t>(8, payload - b));
    }
    kvc::seal_record(r.layout, r.keys[i], 35, r.bytes[i].data());
  }
  return r;
}

// Each returns seconds.
// The store has its default queue (64 MiB of records); the producer puts
// as fast as it can and waits (flush()) only when a put is refused for a
// full queue, then puts that record again: none is dropped, the worker
// writes at its own pace and the queue's buffers are reused, as in steady
// serving. Records go in with put_buffer(), as the record writer hands the
// record it sealed in its buffer to the disk: the store takes the buffer
// (no copy) and hands a spare one back. `fill` false: the timed puts hand
// over buffers filled before the clock starts (the store's own cost, from
// a sealed record to its write); true: each record is first copied into
// the buffer the last put handed back, as the record writer's seal copies
// the blocks (a cost of making records, which seq does not have).
double store_write(const Records& r, const std::string& dir, bool fill) {
  // A budget of exactly the records: the timed puts evict the warm pass's
  // records, oldest first, and overwrite their slots in place, as a store
  // at its budget does in steady state.
  const size_t size = r.layout.record_bytes();
  kvc::DiskStore s(dir, uint64_t(size) * r.bytes.size(), r.layout);
  std::unique_ptr<unsigned char[]> buf(new unsigned char[size]);
  auto hand_over = [&](uint64_t hash, std::unique_ptr<unsigned char[]>& b) {
    while (!s.put_buffer(hash, 35, b)) s.flush();  // a full queue: wait for it
  };
  auto put = [&](uint64_t hash, size_t i) {
    std::memcpy(buf.get(), r.bytes[i].data(), size);
    hand_over(hash, buf);
  };
  // Warm: one untimed pass of the same puts under other hashes, as a store
  // serving for a while is: its spare buffers exist (a cold store's first
  // fill page-faults them in: bench/results) and its slots are in the page
  // cache. The timed records overwrite them, as seq overwrites its file.
  for (size_t i = 0; i < r.bytes.size(); ++i) put(~r.keys[i].lookup_hash, i);
  s.flush();
  std::vector<std::unique_ptr<unsigned char[]>> sealed;
  if (!fill) {
    for (const auto& b : r.bytes) {
      sealed.emplace_back(new unsigned char[size]);
      std::memcpy(sealed.back().get(), b.data(), size);
    }
  }
  const auto t0 = Clock::now();
  for (size_t i = 0; i < r.bytes.size(); ++i) {
    if (fill) put(r.keys[i].lookup_hash, i);
    else hand_over(r.keys[i].lookup_hash, sealed[i]);
  }
  s.flush();
  const double t = seconds_since(t0);
  const kvc::StoreStats st = s.stats();
  if (st.stores != 2 * r.bytes.size() || st.evictions != r.bytes.size()) std::abort();
  return t;
}

// Seconds in load() (*check_s: in check_record() on every record, as an add
// checks each record a store returns). `summed`: load_summed(), which hashes
// each record as it reads it, and check_record_summed() with those sums.
double store_read(const Records& r, const std::string& dir, double* check_s, bool summed = false) {
  kvc::DiskStore s(dir, uint64_t(1) << 40, r.layout);
  constexpr size_t kRun = 16;
  std::vector<std::vector<unsigned char>> out(kRun, std::vector<unsigned char>(r.layout.record_bytes()));
  std::vector<unsigned char*> ptrs;
  for (auto& b : out) ptrs.push_back(b.data());
  std::vector<uint64_t> hashes;
  for (const auto& k : r.keys) hashes.push_back(k.lookup_hash);
  uint64_t sums[kRun];
  double load_s = 0;
  *check_s = 0;
  for (size_t i = 0; i < hashes.size(); i += kRun) {
    const size_t n = std::min(kRun, hashes.size() - i);
    auto t0 = Clock::now();
    if ((summed ? s.load_summed(&hashes[i], n, ptrs.data(), sums) : s.load(&hashes[i], n, ptrs.data())) != n)
      std::abort();
    load_s += seconds_since(t0);
    t0 = Clock::now();
    for (size_t j = 0; j < n; ++j)
      if ((summed ? kvc::check_record_summed(r.layout, r.keys[i + j], ptrs[j], out[j].size(), sums[j])
                  : kvc::check_record(r.layout, r.keys[i + j], ptrs[j], out[j].size())) !=
          kvc::RecordCheck::kOk)
        std::abort();
    *check_s += seconds_since(t0);
  }
  return load_s;
}

// The sequential writers write the file twice and time the second pass,
// over the first (dd conv=notrunc): the store's timed records overwrite the
// slots of its warm pass, so neither grows the page cache while timed (on
// this VM a page the guest has not touched lately costs several times more
// to fill than one it holds or just freed: bench/results/
// 2026-11-28-disk-writes-vm-2cpu.md).
double seq_write(const Records& r, const std::string& dir) {
  const std::string path = dir + "/seq.bin";
  const uint64_t payload = r.layout.payload_bytes;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  must(fd >= 0, "open");
  for (const auto& b : r.bytes)  // untimed first pass
    must(::write(fd, b.data() + r.layout.header_bytes(), payload) == ssize_t(payload), "write");
  const auto t0 = Clock::now();
  must(::lseek(fd, 0, SEEK_SET) == 0, "lseek");
  for (const auto& b : r.bytes)
    must(::write(fd, b.data() + r.layout.header_bytes(), payload) == ssize_t(payload), "write");
  must(::close(fd) == 0, "close");
  return seconds_since(t0);
}

// The readers fill 16 rotating buffers, as the store's 16-record runs do.
constexpr size_t kReadBuffers = 16;

// One file, written (read) sequentially in the store's own batches: one
// pwritev of 64 blocks (as the store's worker writes a 64-record batch), one
// preadv of 16 blocks (as a 16-record load reads).
double seqv_write(const Records& r, const std::string& dir) {
  const std::string path = dir + "/seqv.bin";
  const uint64_t payload = r.layout.payload_bytes;
  std::vector<iovec> iov;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  must(fd >= 0, "open");
  Clock::time_point t0;
  for (int pass = 0; pass < 2; ++pass) {  // the first untimed, as seq_write's
    if (pass == 1) t0 = Clock::now();
    must(::lseek(fd, 0, SEEK_SET) == 0, "lseek");
    for (size_t i = 0; i < r.bytes.size(); i += 64) {
      iov.clear();
      for (size_t j = i; j < std::min(i + 64, r.bytes.size()); ++j)
        iov.push_back(iovec{const_cast<unsigned char*>(r.bytes[j].data() + r.layout.header_bytes()), payload});
      must(::writev(fd, iov.data(), int(iov.size())) == ssize_t(payload * iov.size()), "writev");
    }
  }
  must(::close(fd) == 0, "close");
  return seconds_since(t0);
}

double seqv_read(const Records& r, const std::string& dir) {
  const std::string path = dir + "/seqv.bin";
  const uint64_t payload = r.layout.payload_bytes;
  std::vector<std::vector<unsigned char>> buf(kReadBuffers, std::vector<unsigned char>(payload));
  std::vector<iovec> iov;
  for (auto& b : buf) iov.push_back(iovec{b.data(), payload});
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  must(fd >= 0, "open");
  for (size_t i = 0; i < r.bytes.size(); i += kReadBuffers) {
    const size_t n = std::min(kReadBuffers, r.bytes.size() - i);
    must(::readv(fd, iov.data(), int(n)) == ssize_t(payload * n), "readv");
  }
  ::close(fd);
  return seconds_since(t0);
}

double seq_read(const Records& r, const std::string& dir) {
  const std::string path = dir + "/seq.bin";
  const uint64_t payload = r.layout.payload_bytes;
  std::vector<std::vector<unsigned char>> buf(kReadBuffers, std::vector<unsigned char>(payload));
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  must(fd >= 0, "open");
  for (size_t i = 0; i < r.bytes.size(); ++i)
    must(::read(fd, buf[i % kReadBuffers].data(), payload) == ssize_t(payload), "read");
  ::close(fd);
  return seconds_since(t0);
}

double files_write(const Records& r, const std::string& dir) {
  const uint64_t payload = r.layout.payload_bytes;
  const auto t0 = Clock::now();
  char name[64], tmp[64];
  for (size_t i = 0; i < r.bytes.size(); ++i) {
    std::snprintf(name, sizeof name, "/f-%016" PRIx64, r.keys[i].lookup_hash);
    std::snprintf(tmp, sizeof tmp, "/.t-%016" PRIx64, r.keys[i].lookup_hash);
    const std::string p = dir + name, t = dir + tmp;
    const int fd = ::open(t.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    must(fd >= 0, "open");
    must(::write(fd, r.bytes[i].data() + r.layout.header_bytes(), payload) == ssize_t(payload), "write");
    must(::close(fd) == 0, "close");
    must(::rename(t.c_str(), p.c_str()) == 0, "rename");
  }
  return seconds_since(t0);
}

double files_read(const Records& r, const std::string& dir) {
  const uint64_t payload = r.layout.payload_bytes;
  std::vector<std::vector<unsigned char>> buf(kReadBuffers, std::vector<unsigned char>(payload));
  const auto t0 = Clock::now();
  char name[64];
  for (size_t i = 0; i < r.bytes.size(); ++i) {
    std::snprintf(name, sizeof name, "/f-%016" PRIx64, r.keys[i].lookup_hash);
    const std::string p = dir + name;
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    must(fd >= 0, "open");
    must(::pread(fd, buf[i % kReadBuffers].data(), payload, 0) == ssize_t(payload), "pread");
    ::close(fd);
  }
  return seconds_since(t0);
}

void throughput(const std::string& base, int reps) {
  std::printf("## 1. Throughput, MB/s of payload (median of %d, [min, max])\n\n", reps);
  std::printf("| block | store write | store copy+write | seq write | seqv write | files write | store/seq |"
              " copy+write/seq | store/seqv | store load | store load+check | seq read | seqv read |"
              " files read | load/seq | load+check/seq | load/seqv | summed load+check |"
              " summed load+check/seq |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<uint64_t> sizes = {uint64_t(32) << 10, uint64_t(256) << 10, uint64_t(2) << 20};
  if (const char* only = std::getenv("KVC_BENCH_ONLY_KIB")) sizes = {uint64_t(std::atoi(only)) << 10};
  for (uint64_t payload : sizes) {
    const uint32_t n = uint32_t((uint64_t(192) << 20) / payload);
    const Records r = make_records(payload, n);
    const double mb = double(payload) * n / 1e6;
    std::map<std::string, std::vector<double>> t;
    std::mt19937 order(7);
    for (int rep = 0; rep < reps; ++rep) {
      // Writers and readers interleaved in a random order each repetition;
      // every pair on a fresh directory.
      std::vector<int> kinds = {0, 1, 2, 3};
      std::shuffle(kinds.begin(), kinds.end(), order);
      for (int k : kinds) {
        const std::string dir = make_dir(base);
        if (k == 0) {
          t["store w"].push_back(mb / store_write(r, dir, false));
          // load then check_record (the core today), and load_summed then
          // check_record_summed, in turn first.
          for (int pass = 0; pass < 2; ++pass) {
            double check = 0;
            if ((pass + rep) % 2 == 0) {
              const double load = store_read(r, dir, &check);
              t["store r"].push_back(mb / load);
              t["store rc"].push_back(mb / (load + check));
            } else {
              const double load = store_read(r, dir, &check, true);
              t["store rs"].push_back(mb / (load + check));
            }
          }
          remove_dir(dir);
          const std::string dir2 = make_dir(base);
          t["store cw"].push_back(mb / store_write(r, dir2, true));
          remove_dir(dir2);
          continue;
        } else if (k == 1) {
          t["seq w"].push_back(mb / seq_write(r, dir));
          t["seq r"].push_back(mb / seq_read(r, dir));
        } else if (k == 2) {
          t["seqv w"].push_back(mb / seqv_write(r, dir));
          t["seqv r"].push_back(mb / seqv_read(r, dir));
        } else {
          t["files w"].push_back(mb / files_write(r, dir));
          t["files r"].push_back(mb / files_read(r, dir));
        }
        remove_dir(dir);
      }
    }
    auto cell = [&](const char* k) {
      const Stat s = stat_of(t[k]);
      char b[64];
      std::snprintf(b, sizeof b, "%.0f [%.0f, %.0f]", s.median, s.lo, s.hi);
      return std::string(b);
    };
    auto ratio = [&](const char* a, const char* b) { return stat_of(t[a]).median / stat_of(t[b]).median; };
    std::printf("| %" PRIu64 " KiB x %u | %s | %s | %s | %s | %s | %.2f | %.2f | %.2f | %s | %s | %s | %s | %s | %.2f | %.2f | %.2f | %s | %.2f |\n",
                payload >> 10, n, cell("store w").c_str(), cell("store cw").c_str(), cell("seq w").c_str(),
                cell("seqv w").c_str(), cell("files w").c_str(), ratio("store w", "seq w"),
                ratio("store cw", "seq w"), ratio("store w", "seqv w"),
                cell("store r").c_str(), cell("store rc").c_str(), cell("seq r").c_str(),
                cell("seqv r").c_str(), cell("files r").c_str(), ratio("store r", "seq r"),
                ratio("store rc", "seq r"), ratio("store r", "seqv r"), cell("store rs").c_str(),
                ratio("store rs", "seq r"));
    std::fflush(stdout);
  }
  std::printf("\n");
}

// ---------------------------------------------------------------------------
// 2. The serving path
// ---------------------------------------------------------------------------

#define CHECK_OK(call)                                                          \
  do {                                                                          \
    const kvc_status_t s_ = (call);                                             \
    if (s_ != KVC_OK) {                                                         \
      std::fprintf(stderr, "%s failed: %s\n", #call, kvc_last_error_message()); \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

struct Shape {
  const char* name;
  uint32_t layers, heads, dim;
  kvc_dtype_t dtype;
};

kvc_cache_t* serving_cache(const Shape& m, const std::string& disk) {
  kvc_config_t* c = nullptr;
  CHECK_OK(kvc_config_create(&c));
  CHECK_OK(kvc_config_set_num_layers(c, m.layers));
  CHECK_OK(kvc_config_set_kv_heads(c, m.heads));
  CHECK_OK(kvc_config_set_head_dim(c, m.dim));
  CHECK_OK(kvc_config_set_dtype(c, m.dtype));
  CHECK_OK(kvc_config_set_tokens_per_block(c, 16));
  CHECK_OK(kvc_config_set_max_tokens(c, 1024 * 16));  // 1024 blocks
  if (!disk.empty()) CHECK_OK(kvc_config_set_disk_cache(c, disk.c_str(), uint64_t(1) << 40));
  // Diagnosis (bench/results/2026-11-28-disk-serving-r4-vm-2cpu.md): with
  // KVC_BENCH_OFFLOAD_MIN_PRIORITY=100 the tier is on but writes nothing (the
  // prompts' priority, 35, is below it): what the tier costs a call without
  // the writer's work.
  if (const char* p = std::getenv("KVC_BENCH_OFFLOAD_MIN_PRIORITY"); p != nullptr && !disk.empty())
    CHECK_OK(kvc_config_set_secondary_offload_min_priority(c, uint32_t(std::atoi(p))));
  kvc_cache_t* cache = nullptr;
  CHECK_OK(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

std::vector<int32_t> unique_prompt(uint64_t seed, uint32_t tokens) {
  std::vector<int32_t> p(tokens);
  std::mt19937 rng(uint32_t(seed * 2654435761u + 17));
  for (auto& t : p) t = int32_t(rng() % 128000);
  return p;
}

// What one call cost the serving thread itself: its CPU time (the thread's
// CPU clock) and the user-space instructions it retired (a perf counter of
// this thread; -1 when perf_event_open is not allowed). Unlike wall time,
// neither counts the time other processes or the stores' threads take the
// core: on a shared VM they say what the call does, the wall p99 says what
// the machine did meanwhile.
struct CallCost {
  std::vector<double> wall_us, cpu_us, instructions;
};

class ThreadCounter {
 public:
  ThreadCounter() {
    perf_event_attr a{};
    a.size = sizeof a;
    a.type = PERF_TYPE_HARDWARE;
    a.config = PERF_COUNT_HW_INSTRUCTIONS;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    fd_ = int(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
  }
  ~ThreadCounter() {
    if (fd_ >= 0) ::close(fd_);
  }
  double instructions() const {
    uint64_t v = 0;
    if (fd_ < 0 || ::read(fd_, &v, sizeof v) != ssize_t(sizeof v)) return -1;
    return double(v);
  }

 private:
  int fd_ = -1;
};

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) / 1e3;
}

template <typename F>
void measure(const ThreadCounter& counter, CallCost& cost, F call) {
  const double i0 = counter.instructions();
  const double c0 = thread_cpu_us();
  const auto t0 = Clock::now();
  call();
  const double wall = seconds_since(t0) * 1e6;
  const double c1 = thread_cpu_us();
  const double i1 = counter.instructions();
  cost.wall_us.push_back(wall);
  cost.cpu_us.push_back(c1 - c0);
  cost.instructions.push_back(i0 < 0 || i1 < 0 ? -1 : i1 - i0);
}

// `rounds` adds of unique 512-token prompts (32 blocks: once the pool is
// full, each add evicts 32 cached blocks), each committed and removed; the
// cost of every add, commit and remove (calls[0..2]) and of the three
// together (calls[3]: the round's sum). The remove counts because the tier
// may move work between the calls: a remove caches the sequence's blocks
// with or without it, but a block whose write job is not finished when
// eviction reaches it is deferred and queued again by a later call's drain
// (store_chain.h).
constexpr int kCalls = 4;
const char* const kCallNames[kCalls] = {"add", "commit", "remove", "round (sum)"};
void serve(kvc_cache_t* cache, uint64_t first_seed, int rounds, CallCost* calls) {
  static const ThreadCounter counter;
  for (int i = 0; i < rounds; ++i) {
    const auto p = unique_prompt(first_seed + uint64_t(i), 512);
    const uint64_t id = first_seed + uint64_t(i);
    measure(counter, calls[0], [&] {
      CHECK_OK(kvc_sequence_add(cache, id, p.data(), p.size(), nullptr, nullptr, nullptr));
    });
    measure(counter, calls[1], [&] { CHECK_OK(kvc_sequence_commit(cache, id, p.size())); });
    measure(counter, calls[2], [&] { CHECK_OK(kvc_sequence_remove(cache, id)); });
    calls[3].wall_us.push_back(calls[0].wall_us.back() + calls[1].wall_us.back() +
                               calls[2].wall_us.back());
    calls[3].cpu_us.push_back(calls[0].cpu_us.back() + calls[1].cpu_us.back() +
                              calls[2].cpu_us.back());
    const double i0 = calls[0].instructions.back(), i1 = calls[1].instructions.back(),
                 i2 = calls[2].instructions.back();
    calls[3].instructions.push_back(i0 < 0 || i1 < 0 || i2 < 0 ? -1 : i0 + i1 + i2);
  }
}

double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[size_t(q * double(v.size() - 1))];
}

// KVC_BENCH_PIN=1: the serving thread on CPU 0, the tier's threads (the
// record writer's and the disk's worker, which inherit the affinity of the
// thread that creates the cache) on CPU 1, as a deployment that pins its
// serving thread keeps the library's background threads off its core.
bool pin_threads() {
  const char* v = std::getenv("KVC_BENCH_PIN");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    std::fprintf(stderr, "cannot pin to CPU %d\n", cpu);
    std::exit(1);
  }
}

kvc_cache_t* pinned_cache(const Shape& m, const std::string& disk) {
  if (!pin_threads()) return serving_cache(m, disk);
  // KVC_BENCH_TIER_CPU=0 (diagnosis): the tier's threads on the serving
  // thread's core, so that no line the two share moves between cores.
  const char* tier_cpu = std::getenv("KVC_BENCH_TIER_CPU");
  pin_to(tier_cpu != nullptr ? std::atoi(tier_cpu) : 1);  // the cache's threads start here and stay
  kvc_cache_t* cache = serving_cache(m, disk);
  pin_to(0);  // the serving thread
  return cache;
}

void serving(const std::string& base, int reps) {
  std::printf("## 2. kvc_sequence_add / commit / remove latency, disk tier off vs on\n\n");
  std::printf("1024-block pool, unique 512-token prompts: every add evicts 32 blocks once warm\n");
  std::printf("(on: each block is written through to the disk at its commit, by the record writer's\n");
  std::printf("thread; evicting it then costs nothing more). %d rounds of 400 adds per setting, off and on\n", reps);
  std::printf("alternating; percentiles over all rounds' calls; the range is over rounds' p99.\n\n");
  std::printf("CPU: the serving thread's own CPU time per call (CLOCK_THREAD_CPUTIME_ID), p50 and\n");
  std::printf("p99, off / on; instructions: user-space instructions it retired per call (perf\n");
  std::printf("counter; -1: not allowed here), p50 and p99, off / on. Wall p99 on a shared VM is\n");
  std::printf("mostly other processes (and the store's own threads) taking the core.\n");
  std::printf("Threads: %s.\n\n", pin_threads() ? "serving thread pinned to CPU 0, the tier's threads to CPU 1 (KVC_BENCH_PIN=1)"
                                                 : "not pinned (KVC_BENCH_PIN=1 pins them)");
  std::printf("| model (block set) | call | off p50 | on p50 | off p99 [rounds] | on p99 [rounds] | on/off p99 |"
              " CPU p50 off / on | CPU p99 off / on | CPU on/off p99 | instr p50 off / on | instr p99 off / on | drops |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const Shape shapes[] = {
      {"1 layer fp8, dim 1 (16 B)", 1, 1, 1, KVC_DTYPE_FP8_E4M3},
      {"4 layers x 2 heads x 64, bf16 (32 KiB)", 4, 2, 64, KVC_DTYPE_BF16},
      {"8 layers x 8 heads x 128, bf16 (512 KiB)", 8, 8, 128, KVC_DTYPE_BF16},
  };
  for (const Shape& m : shapes) {
    // Per call and setting (0 off, 1 on): every call's cost, each round's p99.
    std::vector<double> wall[kCalls][2], p99[kCalls][2], cpu[kCalls][2], ins[kCalls][2];
    uint64_t drops = 0;
    for (int rep = 0; rep < reps; ++rep) {
      for (int on = 0; on < 2; ++on) {
        const int which = (rep % 2 == 0) ? on : 1 - on;
        const std::string dir = which ? make_dir(base) : "";
        kvc_cache_t* cache = pinned_cache(m, dir);
        CallCost calls[kCalls];
        serve(cache, 1000000 * uint64_t(rep + 1), 64, calls);  // warm: the pool fills
        for (CallCost& c : calls) c = CallCost{};
        serve(cache, 1000000 * uint64_t(rep + 1) + 64, 400, calls);
        if (which) {
          kvc_tier_stats_t s = KVC_TIER_STATS_INIT;
          CHECK_OK(kvc_cache_get_tier_stats(cache, KVC_TIER_DISK, &s));
          drops += s.dropped_blocks;
        }
        kvc_cache_destroy(cache);
        if (which) remove_dir(dir);
        for (int k = 0; k < kCalls; ++k) {
          const CallCost& c = calls[k];
          wall[k][which].insert(wall[k][which].end(), c.wall_us.begin(), c.wall_us.end());
          cpu[k][which].insert(cpu[k][which].end(), c.cpu_us.begin(), c.cpu_us.end());
          ins[k][which].insert(ins[k][which].end(), c.instructions.begin(), c.instructions.end());
          p99[k][which].push_back(pct(c.wall_us, 0.99));
        }
      }
    }
    for (int k = 0; k < kCalls; ++k) {
      const std::vector<double>* v = wall[k];
      const std::vector<double>* c = cpu[k];
      const std::vector<double>* n = ins[k];
      const Stat off = stat_of(p99[k][0]), on = stat_of(p99[k][1]);
      std::printf("| %s | %s | %.1f us | %.1f us | %.1f us [%.1f, %.1f] | %.1f us [%.1f, %.1f] | %.2f |"
                  " %.2f / %.2f us | %.2f / %.2f us | %.2f | %.0f / %.0f | %.0f / %.0f | %" PRIu64 " |\n",
                  m.name, kCallNames[k], pct(v[0], 0.5), pct(v[1], 0.5), pct(v[0], 0.99), off.lo,
                  off.hi, pct(v[1], 0.99), on.lo, on.hi, pct(v[1], 0.99) / pct(v[0], 0.99),
                  pct(c[0], 0.5), pct(c[1], 0.5), pct(c[0], 0.99), pct(c[1], 0.99),
                  pct(c[1], 0.99) / pct(c[0], 0.99), pct(n[0], 0.5),
                  pct(n[1], 0.5), pct(n[0], 0.99), pct(n[1], 0.99), drops);
    }
    std::fflush(stdout);
  }
  std::printf("\n");
}

// SHA-256 chain digest per block, what offload and lookup add per block.
void digest_cost() {
  std::vector<int32_t> t(16);
  for (int i = 0; i < 16; ++i) t[i] = i * 7919;
  kvc::ChainDigest d{}, s = kvc::scope_chain_digest("S");
  const int n = 200000;
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    t[0] = i;
    d = kvc::block_chain_digest(d, s, kvc::ChainDigest{}, t.data(), 16);
  }
  const double ns = seconds_since(t0) * 1e9 / n;
  std::printf("## 3. SHA-256 chain digest of a 16-token block: %.0f ns (first byte %02x)\n\n", ns,
              d.bytes[0]);
}

}  // namespace

int main(int argc, char** argv) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = argc > 1 ? argv[1] : (tmp != nullptr ? tmp : "/tmp");
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::string part = argc > 3 ? argv[3] : "all";
  if (part != "all" && part != "throughput" && part != "serving") {
    std::fprintf(stderr, "part '%s': one of all, throughput, serving\n", part.c_str());
    return 2;
  }
  digest_cost();
  if (part != "serving") throughput(base, reps);
  if (part != "throughput") serving(base, reps);
  return 0;
}
