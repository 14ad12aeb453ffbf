// The disk tier (issue 22), two questions, each answered by ratios against a
// peer measured in the same run (repetitions interleaved, median and range):
//
// 1. Throughput (disk_tier/throughput.cpp): the disk store
//    (src/store/disk_store.h) writing and reading block records, against
//    plain I/O of the same payload bytes:
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
//   threads on CPU 1; KVC_BENCH_ROUND_US=N: the serving loop starts a round
//   every N us, spinning in between, as an engine whose steps take that
//   long: the record writer then keeps up unless the blocks committed per
//   second exceed what it writes; default 0, rounds back to back, which
//   keeps the writer's queue full: an overload, the case of record;
//   KVC_BENCH_ROUNDS=N: N timed rounds per setting and repetition (default
//   400; the disk then holds about 32 x N records, so a longer run asks the
//   lookup filter of a fuller store);
//   KVC_BENCH_ROOM_AHEAD=1: kvc_cache_make_room before each round, timed
//   as a call of its own and in the round's sum;
//   KVC_BENCH_DEVICE=cuda:N: the serving caches on that GPU, whose blocks
//   go to the disk at eviction instead; KVC_BENCH_CPU_TIME=0: wall time
//   only, no CPU-time system call between the timed calls)
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
#include "disk_tier/common.h"
#include "core/block_record.h"
#include "kvcache/kvcache.h"
#include "store/disk_store.h"

namespace {

using kvc_disk_bench::Clock;
using kvc_disk_bench::make_dir;
using kvc_disk_bench::remove_dir;
using kvc_disk_bench::seconds_since;
using kvc_disk_bench::Stat;
using kvc_disk_bench::stat_of;

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

// KVC_BENCH_DEVICE: "cuda:N", else nullptr (the CPU backend).
const char* bench_device() {
  const char* d = std::getenv("KVC_BENCH_DEVICE");
  return d != nullptr && std::strncmp(d, "cuda:", 5) == 0 ? d : nullptr;
}

kvc_cache_t* serving_cache(const Shape& m, const std::string& disk) {
  kvc_config_t* c = nullptr;
  CHECK_OK(kvc_config_create(&c));
  CHECK_OK(kvc_config_set_num_layers(c, m.layers));
  CHECK_OK(kvc_config_set_kv_heads(c, m.heads));
  CHECK_OK(kvc_config_set_head_dim(c, m.dim));
  CHECK_OK(kvc_config_set_dtype(c, m.dtype));
  CHECK_OK(kvc_config_set_tokens_per_block(c, 16));
  CHECK_OK(kvc_config_set_max_tokens(c, 1024 * 16));  // 1024 blocks
  // KVC_BENCH_DEVICE=cuda:N: a CUDA cache. Its pools are device memory, so
  // its blocks go to the disk at eviction (copied out on the call's stream,
  // sealed and put by the offer worker), not at commit (store_chain.h).
  if (const char* d = bench_device(); d != nullptr)
    CHECK_OK(kvc_config_set_device(c, KVC_DEVICE_CUDA, std::atoi(d + 5)));
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

// KVC_BENCH_CPU_TIME=0: no CPU-time reading around the calls. Where
// reading the thread's CPU clock is a system call (this VM: 1.35 us, and
// without PCID each one flushes the TLB) every timed call starts cold; the
// wall columns then say what a call costs between two plain clock reads
// (vDSO), and the CPU columns read 0.
bool read_cpu_time() {
  static const bool on = [] {
    const char* v = std::getenv("KVC_BENCH_CPU_TIME");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

double thread_cpu_us() {
  if (!read_cpu_time()) return 0;
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
// cost of every add, commit and remove (calls[0..2]), of the make_room
// before the round with KVC_BENCH_ROOM_AHEAD=1 (calls[3]: a serving call
// too, between steps) and of the round's calls together (calls[4]: the
// sum). The remove counts because the tier may move work between the
// calls: a remove caches the sequence's blocks with or without it, but a
// block whose write job is not finished when eviction reaches it is
// deferred and queued again by a later call's drain (store_chain.h).
constexpr int kCalls = 5, kMakeRoom = 3, kRound = 4;
const char* const kCallNames[kCalls] = {"add", "commit", "remove", "make_room (ahead)",
                                        "round (sum)"};
// KVC_BENCH_ROUND_US: a round's period (0: back to back).
double round_period_us() {
  const char* v = std::getenv("KVC_BENCH_ROUND_US");
  return v != nullptr ? std::atof(v) : 0.0;
}

// KVC_BENCH_ROUNDS: timed rounds per setting and repetition.
int timed_rounds() {
  const char* v = std::getenv("KVC_BENCH_ROUNDS");
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : 400;
}

// KVC_BENCH_ROOM_AHEAD=1: before each round, kvc_cache_make_room for the
// add's 32 blocks and its tail (as an engine calls it while the device runs
// a step), timed as a call of its own: the add then evicts nothing, and the
// offloads of a device cache's evicted blocks leave the add.
bool room_ahead() {
  const char* v = std::getenv("KVC_BENCH_ROOM_AHEAD");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

void serve(kvc_cache_t* cache, uint64_t first_seed, int rounds, CallCost* calls) {
  static const ThreadCounter counter;
  static const double period_us = round_period_us();
  static const bool ahead = room_ahead();
  auto next = Clock::now();
  for (int i = 0; i < rounds; ++i) {
    if (period_us > 0) {  // spin to the round's start: no sleep, the core stays this thread's
      next += std::chrono::nanoseconds(int64_t(period_us * 1000));
      while (Clock::now() < next) {
      }
    }
    const auto p = unique_prompt(first_seed + uint64_t(i), 512);
    const uint64_t id = first_seed + uint64_t(i);
    if (ahead)
      measure(counter, calls[kMakeRoom],
              [&] { CHECK_OK(kvc_cache_make_room(cache, 33, nullptr, nullptr)); });
    measure(counter, calls[0], [&] {
      CHECK_OK(kvc_sequence_add(cache, id, p.data(), p.size(), nullptr, nullptr, nullptr));
    });
    measure(counter, calls[1], [&] { CHECK_OK(kvc_sequence_commit(cache, id, p.size())); });
    measure(counter, calls[2], [&] { CHECK_OK(kvc_sequence_remove(cache, id)); });
    double wall = 0, cpu = 0, ins = 0;
    for (int k = 0; k < kRound; ++k) {
      if (k == kMakeRoom && !ahead) continue;
      wall += calls[k].wall_us.back();
      cpu += calls[k].cpu_us.back();
      const double n = calls[k].instructions.back();
      ins = ins < 0 || n < 0 ? -1 : ins + n;
    }
    calls[kRound].wall_us.push_back(wall);
    calls[kRound].cpu_us.push_back(cpu);
    calls[kRound].instructions.push_back(ins);
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

// KVC_BENCH_TIER_CPU=N: the tier's threads on CPU N (default 1). Where CPU 1
// is the serving CPU's hyperthread sibling (the 2-core dev VM at times:
// bench/results/2026-12-01-disk-serving-make-room-vm-and-host.md), the
// tier's work takes the serving thread's core; 0 (diagnosis): its own CPU,
// so that no line the two share moves between cores.
int tier_cpu() {
  const char* v = std::getenv("KVC_BENCH_TIER_CPU");
  return v != nullptr ? std::atoi(v) : 1;
}

kvc_cache_t* pinned_cache(const Shape& m, const std::string& disk) {
  if (!pin_threads()) return serving_cache(m, disk);
  pin_to(tier_cpu());  // the cache's threads start here and stay
  kvc_cache_t* cache = serving_cache(m, disk);
  pin_to(0);  // the serving thread
  return cache;
}

void serving(const std::string& base, int reps) {
  std::printf("## 2. kvc_sequence_add / commit / remove latency, disk tier off vs on\n\n");
  std::printf("1024-block pool, unique 512-token prompts: every add evicts 32 blocks once warm\n");
  if (bench_device() == nullptr)
    std::printf("(on: each block is written through to the disk at its commit, by the record writer's\n"
                "thread; evicting it then costs nothing more).");
  else
    std::printf("(on: each block is offered to the disk at its eviction; see Device below).");
  std::printf(" %d rounds of %d adds per setting, off and on\n", reps, timed_rounds());
  std::printf("alternating; percentiles over all rounds' calls; the range is over rounds' p99.\n\n");
  std::printf("CPU: the serving thread's own CPU time per call (CLOCK_THREAD_CPUTIME_ID), p50 and\n");
  std::printf("p99, off / on; instructions: user-space instructions it retired per call (perf\n");
  std::printf("counter; -1: not allowed here), p50 and p99, off / on. Wall p99 on a shared VM is\n");
  std::printf("mostly other processes (and the store's own threads) taking the core. drops /\n");
  std::printf("offered: blocks the disk tier dropped / its writer handed to the disk (puts the store\n");
  std::printf("accepted) in the on runs, read as each run ends.\n");
  if (round_period_us() > 0)
    std::printf("Rounds: one every %.0f us (KVC_BENCH_ROUND_US), spinning in between.\n",
                round_period_us());
  else
    std::printf("Rounds: back to back (the record writer's queue stays full: an overload).\n");
  if (bench_device() != nullptr)
    std::printf("Device: %s (KVC_BENCH_DEVICE): on, each evicted block is offered to the disk at its\n"
                "eviction (copied out on the call's stream; sealed and put by the offer worker), not\n"
                "written at its commit.\n", bench_device());
  if (pin_threads())
    std::printf("Threads: serving thread pinned to CPU 0, the tier's threads to CPU %d (KVC_BENCH_PIN=1).\n\n",
                tier_cpu());
  else
    std::printf("Threads: not pinned (KVC_BENCH_PIN=1 pins them).\n\n");
  std::printf("| model (block set) | call | off p50 | on p50 | off p99 [rounds] | on p99 [rounds] | on/off p99 |"
              " CPU p50 off / on | CPU p99 off / on | CPU on/off p99 | instr p50 off / on | instr p99 off / on | drops | offered |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const Shape shapes[] = {
      {"1 layer fp8, dim 1 (16 B)", 1, 1, 1, KVC_DTYPE_FP8_E4M3},
      {"4 layers x 2 heads x 64, bf16 (32 KiB)", 4, 2, 64, KVC_DTYPE_BF16},
      {"8 layers x 8 heads x 128, bf16 (512 KiB)", 8, 8, 128, KVC_DTYPE_BF16},
  };
  for (const Shape& m : shapes) {
    // Per call and setting (0 off, 1 on): every call's cost, each round's p99.
    std::vector<double> wall[kCalls][2], p99[kCalls][2], cpu[kCalls][2], ins[kCalls][2];
    uint64_t drops = 0, offered = 0;  // blocks the tier dropped and its writer handed to the disk, over the on runs
    for (int rep = 0; rep < reps; ++rep) {
      for (int on = 0; on < 2; ++on) {
        const int which = (rep % 2 == 0) ? on : 1 - on;
        const std::string dir = which ? make_dir(base) : "";
        kvc_cache_t* cache = pinned_cache(m, dir);
        CallCost calls[kCalls];
        serve(cache, 1000000 * uint64_t(rep + 1), 64, calls);  // warm: the pool fills
        for (CallCost& c : calls) c = CallCost{};
        serve(cache, 1000000 * uint64_t(rep + 1) + 64, timed_rounds(), calls);
        if (which) {
          kvc_tier_stats_t s = KVC_TIER_STATS_INIT;
          CHECK_OK(kvc_cache_get_tier_stats(cache, KVC_TIER_DISK, &s));
          drops += s.dropped_blocks;
          offered += s.offered_blocks;
        }
        kvc_cache_destroy(cache);
        if (which) remove_dir(dir);
        for (int k = 0; k < kCalls; ++k) {
          const CallCost& c = calls[k];
          wall[k][which].insert(wall[k][which].end(), c.wall_us.begin(), c.wall_us.end());
          cpu[k][which].insert(cpu[k][which].end(), c.cpu_us.begin(), c.cpu_us.end());
          ins[k][which].insert(ins[k][which].end(), c.instructions.begin(), c.instructions.end());
          if (!c.wall_us.empty()) p99[k][which].push_back(pct(c.wall_us, 0.99));
        }
      }
    }
    for (int k = 0; k < kCalls; ++k) {
      if (wall[k][0].empty()) continue;  // make_room without KVC_BENCH_ROOM_AHEAD=1
      const std::vector<double>* v = wall[k];
      const std::vector<double>* c = cpu[k];
      const std::vector<double>* n = ins[k];
      const Stat off = stat_of(p99[k][0]), on = stat_of(p99[k][1]);
      std::printf("| %s | %s | %.1f us | %.1f us | %.1f us [%.1f, %.1f] | %.1f us [%.1f, %.1f] | %.2f |"
                  " %.2f / %.2f us | %.2f / %.2f us | %.2f | %.0f / %.0f | %.0f / %.0f | %" PRIu64 " | %" PRIu64 " |\n",
                  m.name, kCallNames[k], pct(v[0], 0.5), pct(v[1], 0.5), pct(v[0], 0.99), off.lo,
                  off.hi, pct(v[1], 0.99), on.lo, on.hi, pct(v[1], 0.99) / pct(v[0], 0.99),
                  pct(c[0], 0.5), pct(c[1], 0.5), pct(c[0], 0.99), pct(c[1], 0.99),
                  pct(c[1], 0.99) / pct(c[0], 0.99), pct(n[0], 0.5),
                  pct(n[1], 0.5), pct(n[0], 0.99), pct(n[1], 0.99), drops, offered);
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
  if (part != "serving") kvc_disk_bench::throughput(base, reps);
  if (part != "throughput") serving(base, reps);
  return 0;
}
