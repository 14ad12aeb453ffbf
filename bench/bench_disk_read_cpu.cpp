// The disk tier's verified read (issue 22) in the reading thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID: what the thread does on its CPU, its kernel
// copies included, not the time it waits for one): on a loaded machine the
// wall-clock figures of bench_disk_tier swing with the other processes,
// these do not. Per block size and run length (records per load(): 16 as
// bench_disk_tier reads, 64 or 32 MiB as the store chain reads a chunk,
// src/core/store_chain_onboard.cpp), MB/s of payload, median over repetitions, for
//   seq       one file of the payloads, one read() per block into 16 (or run)
//             rotating buffers (dd bs=<block>);
//   load      DiskStore::load() of runs, no check;
//   checked   load() then check_record() on every record (what the core did);
//   summed    load_summed() (each record hashed in 256 KiB windows right
//             after their preadv) then check_record_summed().
// The files are read once, untimed, before the repetitions (warm page cache).
//   bench_disk_read_cpu [DIR] [REPETITIONS]   (DIR default /tmp, 11 repetitions)
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/block_record.h"
#include "store/disk_store.h"

namespace {

using namespace kvc;

double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void one(const std::string& base, uint64_t payload, size_t run, int reps) {
  RecordLayout l;
  l.fingerprint = 0xbe7c4;
  l.tokens_per_block = 16;
  l.payload_bytes = payload;
  const uint32_t n = uint32_t((uint64_t(192) << 20) / payload);
  const std::string dir = base + "/kvc-bench-read-cpu";
  if (std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()) != 0) std::exit(1);
  std::vector<std::vector<int32_t>> tokens(n);
  std::vector<RecordKey> keys(n);
  std::vector<uint64_t> hashes(n);
  const std::string seq_path = dir + "/seq.bin";
  {
    DiskStore s(dir, uint64_t(l.record_bytes()) * n, l);
    std::vector<unsigned char> rec(l.record_bytes());
    std::mt19937_64 rng(payload);
    const int fd = ::open(seq_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (uint32_t i = 0; i < n; ++i) {
      for (int t = 0; t < 16; ++t) tokens[i].push_back(int32_t(rng() % 128000));
      keys[i].lookup_hash = hashes[i] = rng();
      keys[i].tokens = tokens[i].data();
      for (size_t b = l.header_bytes(); b + 8 <= rec.size(); b += 8) {
        const uint64_t x = rng();
        std::memcpy(&rec[b], &x, 8);
      }
      seal_record(l, keys[i], 35, rec.data());
      while (!s.put(hashes[i], 35, rec.data())) s.flush();
      if (::write(fd, rec.data() + l.header_bytes(), payload) != ssize_t(payload)) std::exit(1);
    }
    ::close(fd);
    s.flush();
  }
  DiskStore s(dir, uint64_t(1) << 40, l);
  std::vector<std::vector<unsigned char>> out(run, std::vector<unsigned char>(l.record_bytes()));
  std::vector<unsigned char*> ptrs;
  for (auto& b : out) ptrs.push_back(b.data());
  std::vector<uint64_t> sums(run);
  const double mb = double(payload) * double(n / run * run) / 1e6;
  std::vector<double> t[4];
  for (int rep = -1; rep < reps; ++rep) {  // rep -1: untimed warm pass
    for (int k = 0; k < 4; ++k) {
      const int mode = (k + std::max(rep, 0)) % 4;
      const double t0 = cpu_seconds();
      if (mode == 0) {
        const int fd = ::open(seq_path.c_str(), O_RDONLY);
        for (size_t i = 0; i < n / run * run; ++i)
          if (::read(fd, ptrs[i % run], payload) != ssize_t(payload)) std::abort();
        ::close(fd);
      } else {
        for (size_t i = 0; i + run <= n; i += run) {
          const size_t got = mode == 3 ? s.load_summed(&hashes[i], run, ptrs.data(), sums.data())
                                       : s.load(&hashes[i], run, ptrs.data());
          if (got != run) std::abort();
          for (size_t j = 0; j < run && mode != 1; ++j) {
            const RecordCheck c =
                mode == 3 ? check_record_summed(l, keys[i + j], ptrs[j], out[j].size(), sums[j])
                          : check_record(l, keys[i + j], ptrs[j], out[j].size());
            if (c != RecordCheck::kOk) std::abort();
          }
        }
      }
      if (rep >= 0) t[mode].push_back(mb / (cpu_seconds() - t0));
    }
  }
  const double seq = median(t[0]), load = median(t[1]), checked = median(t[2]), summed = median(t[3]);
  std::printf("| %llu KiB x %u | %zu | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | **%.2f** |\n",
              static_cast<unsigned long long>(payload >> 10), n, run, seq, load, checked, summed,
              load / seq, checked / seq, summed / seq);
  std::fflush(stdout);
  if (std::system(("rm -rf '" + dir + "'").c_str()) != 0) std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string base = argc > 1 ? argv[1] : "/tmp";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 11;
  std::printf("CPU-time MB/s of payload, median of %d\n\n", reps);
  std::printf("| block | run | seq | load | load+check | summed load+check | load/seq | load+check/seq |"
              " summed/seq |\n|---|---|---|---|---|---|---|---|---|\n");
  for (auto [kib, run] : {std::pair<uint64_t, size_t>{32, 16}, {32, 64}, {256, 16}, {256, 64},
                          {2048, 16}})
    one(base, kib << 10, run, reps);
  return 0;
}
