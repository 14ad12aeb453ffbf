// Onboard throughput from the Redis remote tier (issue 22) against
// redis-benchmark GET of the same value size, both run in this process's
// run, alternating, against one redis-server on loopback (bench/redis_tier.sh
// starts it). Ours: RedisStore::load of a prompt's chain of records
// (pipelined, about 8 MiB per round trip) into host buffers, then
// check_record of each (magic, geometry, checksum, chain digest, tokens) as
// the core does before a record becomes KV; payload bytes per second (the
// 192-byte record header is not counted). Peer: `redis-benchmark -t set,get
// -d SIZE -c 1 -P DEPTH` (one connection, as ours), GET requests per second
// times SIZE, at its best of the depths 1, 4, 16 and ours, chosen once per
// size (redis-benchmark slows down with deep pipelines of large values: its
// hiredis reader moves its input buffer after every reply); then each
// repetition runs ours and the peer back to back. Target: ours / peer >=
// 0.80 (median of the per-repetition ratios).
//   bench_redis_tier --port P [--reps N] [--sizes 32768,262144,2097152]
//                    [--redis-benchmark PATH]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/block_record.h"
#include "store/redis_store.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kTokensPerBlock = 16;
constexpr uint64_t kChainBytes = 64ull << 20;  // records per chain: 64 MiB of payload
constexpr uint64_t kBytesPerRep = 512ull << 20;  // bytes moved per measurement, each side

struct Chain {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<kvc::RecordKey> keys;
  std::vector<std::vector<unsigned char>> records;
};

Chain make_chain(const kvc::RecordLayout& l, size_t n) {
  Chain c;
  c.tokens.resize(n);
  c.keys.resize(n);
  c.records.resize(n);
  const kvc::ChainDigest scope = kvc::scope_chain_digest("bench");
  kvc::ChainDigest parent{};
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t t = 0; t < kTokensPerBlock; ++t) c.tokens[i].push_back(int32_t(i * 100 + t));
    c.keys[i].digest = kvc::block_chain_digest(parent, scope, kvc::ChainDigest{},
                                               c.tokens[i].data(), kTokensPerBlock);
    c.keys[i].lookup_hash = 0x5eed0000ull + i;
    c.keys[i].tokens = c.tokens[i].data();
    parent = c.keys[i].digest;
    c.records[i].resize(l.record_bytes());
    for (size_t b = 0; b < l.payload_bytes; ++b) {
      c.records[i][l.header_bytes() + b] = static_cast<unsigned char>(b * 31 + i);
    }
    kvc::seal_record(l, c.keys[i], 35, c.records[i].data());
  }
  return c;
}

// GET bytes per second from redis-benchmark, or 0 on failure.
double peer_rate(const std::string& bin, int port, uint64_t size, size_t depth) {
  const uint64_t requests = std::max<uint64_t>(kBytesPerRep / size, 16 * depth);
  const std::string cmd = bin + " -h 127.0.0.1 -p " + std::to_string(port) +
                          " -t set,get -d " + std::to_string(size) + " -c 1 -P " +
                          std::to_string(depth) + " -n " + std::to_string(requests) +
                          " --csv 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return 0;
  char line[512];
  double rps = 0;
  while (std::fgets(line, sizeof line, p) != nullptr) {
    if (std::strncmp(line, "\"GET\",\"", 7) == 0) rps = std::atof(line + 7);
  }
  pclose(p);
  return rps * static_cast<double>(size);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  int reps = 5;
  std::string bin = "redis-benchmark";
  std::vector<uint64_t> sizes = {32768, 262144, 2097152};
  uint64_t chunk_bytes = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--port") port = std::atoi(argv[i + 1]);
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else if (a == "--redis-benchmark") bin = argv[i + 1];
    else if (a == "--chunk-bytes") chunk_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--sizes") {
      sizes.clear();
      for (const char* s = argv[i + 1]; *s;) {
        char* end;
        sizes.push_back(std::strtoull(s, &end, 10));
        s = *end == ',' ? end + 1 : end;
      }
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (port <= 0 || reps <= 0) {
    std::fprintf(stderr, "usage: bench_redis_tier --port P [--reps N] [--sizes a,b,c]\n");
    return 2;
  }
  std::printf("| block | chain | depth ours / peer | ours GB/s median [min, max] | "
              "redis-benchmark GET GB/s median [min, max] | ours / peer median [min, max] |\n"
              "|---|---|---|---|---|---|\n");
  bool met = true;
  for (const uint64_t size : sizes) {
    kvc::RecordLayout l;
    l.fingerprint = 0xbe9c;
    l.tokens_per_block = kTokensPerBlock;
    l.payload_bytes = size;
    const size_t n = static_cast<size_t>(std::max<uint64_t>(kChainBytes / size, 1));
    Chain chain = make_chain(l, n);
    kvc::RedisStoreOptions o;
    o.url = "redis://127.0.0.1:" + std::to_string(port) + "/0";
    o.key_namespace = "bench";
    o.capacity_bytes = 1ull << 34;
    o.command_timeout = std::chrono::milliseconds(10000);
    o.queue_bytes = (n + 1) * l.record_bytes();
    o.chunk_bytes = chunk_bytes;
    kvc::RedisStore store(o, l);
    for (size_t i = 0; i < n; ++i) {
      if (!store.put(chain.keys[i].lookup_hash, 35, chain.records[i].data())) {
        std::fprintf(stderr, "put dropped\n");
        return 1;
      }
    }
    store.flush();
    std::vector<uint64_t> hashes(n);
    for (size_t i = 0; i < n; ++i) hashes[i] = chain.keys[i].lookup_hash;
    std::vector<std::vector<unsigned char>> out(n, std::vector<unsigned char>(l.record_bytes()));
    std::vector<unsigned char*> ptrs;
    for (auto& b : out) ptrs.push_back(b.data());
    const size_t loads = static_cast<size_t>(std::max<uint64_t>(kBytesPerRep / (n * size), 1));

    // The peer's depth: its best of 1, 4, 16 and ours, measured once
    // (then each repetition runs ours and the peer back to back).
    size_t peer_depth = 1;
    double peer_best = 0;
    for (size_t depth : {size_t(1), size_t(4), size_t(16), store.chunk()}) {
      const double rate = peer_rate(bin, port, size, depth);
      if (rate > peer_best) {
        peer_best = rate;
        peer_depth = depth;
      }
    }
    std::vector<double> ours, peer, ratio;
    for (int r = 0; r < reps; ++r) {
      const auto start = Clock::now();
      for (size_t k = 0; k < loads; ++k) {
        const size_t got = store.load(hashes.data(), n, ptrs.data());
        for (size_t i = 0; i < got; ++i) {
          if (kvc::check_record(l, chain.keys[i], ptrs[i], l.record_bytes()) !=
              kvc::RecordCheck::kOk) {
            std::fprintf(stderr, "record %zu refused\n", i);
            return 1;
          }
        }
        if (got != n) {
          std::fprintf(stderr, "load got %zu of %zu\n", got, n);
          return 1;
        }
      }
      const double secs = std::chrono::duration<double>(Clock::now() - start).count();
      ours.push_back(static_cast<double>(loads * n * size) / secs);
      peer.push_back(peer_rate(bin, port, size, peer_depth));
      if (peer.back() <= 0) {
        std::fprintf(stderr, "redis-benchmark failed\n");
        return 1;
      }
      ratio.push_back(ours.back() / peer.back());
    }
    auto gb = [](double v) { return v / 1e9; };
    const double rm = median(ratio);
    met = met && rm >= 0.80;
    std::printf("| %llu KiB | %zu | %zu / %zu | %.2f [%.2f, %.2f] | %.2f [%.2f, %.2f] | %.2f [%.2f, %.2f] |\n",
                static_cast<unsigned long long>(size / 1024), n, store.chunk(), peer_depth,
                gb(median(ours)),
                gb(*std::min_element(ours.begin(), ours.end())),
                gb(*std::max_element(ours.begin(), ours.end())), gb(median(peer)),
                gb(*std::min_element(peer.begin(), peer.end())),
                gb(*std::max_element(peer.begin(), peer.end())), rm,
                *std::min_element(ratio.begin(), ratio.end()),
                *std::max_element(ratio.begin(), ratio.end()));
    std::fflush(stdout);
  }
  std::printf("\ntarget ours / peer >= 0.80 (median): %s\n", met ? "met" : "NOT met");
  return 0;
}
