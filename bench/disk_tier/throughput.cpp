// Part 1 of bench_disk_tier (its usage and what each column means are at
// the top of bench_disk_tier.cpp): the disk store writing and reading block
// records against plain I/O of the same payload bytes.
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "common.h"
#include "core/block_record.h"
#include "store/disk_store.h"

namespace kvc_disk_bench {
namespace {

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

}  // namespace

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

}  // namespace kvc_disk_bench
