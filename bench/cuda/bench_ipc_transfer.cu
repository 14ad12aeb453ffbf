// Issue 25's transfer benchmark: export + import of a 32K-token prompt over
// CUDA IPC between two processes on one GPU, against one cudaMemcpy of the
// same bytes.
//
// Geometry: Llama-3-8B-like (32 layers, 8 kv heads, head dim 128, bf16,
// 16-token blocks: 2 MiB a block, 2048 blocks, 4 GiB). Both pools hand out
// their blocks in random order (every block first taken by a one-block
// filler sequence, the fillers then removed in shuffled order), so the
// exported and the imported block ids are scattered over each pool.
//
// The prefill process (this program) commits the prompt and shares its
// pool once (kvc_cache_describe_pool_share, kvc_cache_export_pool_chunk:
// POSIX file descriptors over the socket, SCM_RIGHTS); the decode process
// (this program exec'd with --decode-fd) maps it once ("map", host time: a
// server maps a peer once and keeps it). Then per repetition the prefill
// process exports the prompt (kvc_cache_export_sequence, block ids, key
// blob: host time, "export") and sends ids and keys; the decode process
// times:
//   import begin: kvc_cache_import_begin (key blob verified against its own
//                 tokens, blocks reserved), describe, block ids (host time);
//   copy:         offsets upload + one gather kernel over the 2048 blocks,
//                 straight from the peer's mapped pool into its own
//                 (GPU time, events; and host wall time to the sync);
//   complete:     kvc_import_complete (host time).
// The decode side then acks, removes the sequence and drops the cached
// blocks (kvc_cache_reset_reuse) so that the next import writes every
// block again. Raw: one cudaMemcpy of the same byte count from the peer's
// mapped pool into this process's pool (GPU time, events), the copy a
// transport without any bookkeeping would make. Medians over the
// repetitions, with min and max. The socket traffic (about 330 KB of ids
// and keys) is not timed. Build it Release: a Debug build runs the
// invariant checker after every mutation, which the host rows would time.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../../examples/cuda_ipc_transfer/ipc_transport.cuh"
#include "bench_common.cuh"

namespace {

constexpr uint32_t kLayers = 32, kHeads = 8, kDim = 128, kT = 16;
constexpr uint32_t kTokens = 32768, kBlocks = kTokens / kT;
constexpr uint64_t kBlockBytes = uint64_t(kLayers) * 2 * kT * kHeads * kDim * 2;
constexpr uint64_t kPoolBlocks = kBlocks + kBlocks / 8;
constexpr int kWarmup = 2, kReps = 15;

double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<int32_t> prompt() {
  std::vector<int32_t> t(kTokens);
  for (uint32_t i = 0; i < kTokens; ++i) t[i] = int32_t(1000 + (i * 7919u) % 50000u);
  return t;
}

kvc_cache_t* make_cache() {
  kvc_config_t* cfg = nullptr;
  BENCH_KVC(kvc_config_create(&cfg));
  kvc_config_set_num_layers(cfg, kLayers);
  kvc_config_set_kv_heads(cfg, kHeads);
  kvc_config_set_head_dim(cfg, kDim);
  kvc_config_set_dtype(cfg, KVC_DTYPE_BF16);
  kvc_config_set_tokens_per_block(cfg, kT);
  kvc_config_set_device(cfg, KVC_DEVICE_CUDA, 0);
  kvc_config_set_primary_bytes(cfg, kPoolBlocks * kBlockBytes);
  kvc_cache_t* cache = nullptr;
  BENCH_KVC(kvc_cache_create(cfg, &cache));
  kvc_config_destroy(cfg);
  return cache;
}

// Every block taken by a one-block filler, the fillers removed in shuffled
// order: the free list hands blocks out scattered over the pool.
void scatter_free_list(kvc_cache_t* cache, uint32_t seed) {
  kvc_cache_stats_t st = KVC_CACHE_STATS_INIT;
  BENCH_KVC(kvc_cache_get_stats(cache, &st));
  std::vector<uint64_t> ids;
  std::vector<int32_t> toks(kT);
  for (uint64_t i = 0; i < st.free_blocks; ++i) {
    for (uint32_t t = 0; t < kT; ++t) toks[t] = int32_t(900000 + i * kT + t);
    uint64_t cached = 0;
    const kvc_status_t s =
        kvc_sequence_add(cache, 1000000 + i, toks.data(), kT, nullptr, nullptr, &cached);
    if (s == KVC_ERR_OUT_OF_BLOCKS) break;
    BENCH_KVC(s);
    ids.push_back(1000000 + i);
  }
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  for (uint64_t id : ids) BENCH_KVC(kvc_sequence_remove(cache, id));
}

// Fraction of consecutive positions whose block ids are adjacent.
double adjacency(const std::vector<int32_t>& ids) {
  size_t adj = 0;
  for (size_t i = 1; i < ids.size(); ++i) adj += ids[i] == ids[i - 1] + 1;
  return ids.size() > 1 ? double(adj) / double(ids.size() - 1) : 0;
}

void die(const char* what) {
  std::fprintf(stderr, "bench_ipc_transfer: %s\n", what);
  std::exit(1);
}

// ---------------------------------------------------------------- prefill

int prefill(int fd, pid_t child) {
  kvc_cache_t* cache = make_cache();
  scatter_free_list(cache, 7);
  const std::vector<int32_t> tokens = prompt();
  uint64_t cached = 0;
  BENCH_KVC(kvc_sequence_add(cache, 1, tokens.data(), tokens.size(), nullptr, nullptr, &cached));
  BENCH_KVC(kvc_sequence_commit(cache, 1, kTokens));
  kvc_layer_view_t view0 = KVC_LAYER_VIEW_INIT;
  BENCH_KVC(kvc_cache_layer_view(cache, 0, &view0));
  // Some bytes in the blocks (the copy does not care what they are).
  kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
  BENCH_KVC(kvc_cache_describe_pool(cache, 0, &pool));
  BENCH_CUDA(cudaMemset(pool.base, 0x3c, pool.bytes));
  BENCH_CUDA(cudaDeviceSynchronize());
  // Share the pool once: a descriptor per physical allocation.
  kvc_ipc::Header hdr{};
  std::memcpy(hdr.magic, "KVCIPC02", 8);
  std::vector<kvc_ipc::Chunk> chunks;
  std::vector<int> fds;
  if (!kvc_ipc::share_pool(cache, 0, 0, &hdr, &chunks, &fds)) die(kvc_last_error_message());
  if (!kvc_ipc::send_all(fd, &hdr, sizeof hdr) ||
      !kvc_ipc::send_fds(fd, chunks.data(), chunks.size() * sizeof(kvc_ipc::Chunk), fds))
    die("sending the pool's descriptors failed");
  for (int d : fds) close(d);
  hdr.group_offset = uint64_t(static_cast<char*>(view0.base) - static_cast<char*>(pool.base));
  hdr.block_stride = view0.block_stride;
  kvc_group_desc_t group = KVC_GROUP_DESC_INIT;
  BENCH_KVC(kvc_cache_describe_group(cache, 0, &group));
  if (group.block_bytes != kBlockBytes || view0.block_stride != kBlockBytes)
    die("unexpected block bytes");
  hdr.block_bytes = group.block_bytes;
  hdr.num_layers = 0;
  hdr.tokens_per_block = kT;
  for (int rep = 0; rep < kWarmup + kReps; ++rep) {
    const double t0 = now_us();
    kvc_export_t* exp = nullptr;
    BENCH_KVC(kvc_cache_export_sequence(cache, 1, 0, &exp));
    kvc_transfer_desc_t ed = KVC_TRANSFER_DESC_INIT;
    BENCH_KVC(kvc_export_describe(exp, &ed));
    std::vector<int32_t> from(ed.num_blocks);
    size_t n = 0, size = 0;
    BENCH_KVC(kvc_export_block_ids(exp, 0, from.data(), from.size(), &n));
    std::string keys(ed.keys_bytes, '\0');
    BENCH_KVC(kvc_export_keys(exp, &keys[0], keys.size(), &size));
    hdr.export_us = now_us() - t0;
    hdr.num_blocks = ed.num_blocks;
    hdr.keys_bytes = ed.keys_bytes;
    if (rep == 0)
      std::printf(
          "prefill: %llu blocks exported, %.1f%% of adjacent positions in adjacent "
          "block ids\n",
          (unsigned long long)ed.num_blocks, 100 * adjacency(from));
    if (!kvc_ipc::send_all(fd, &hdr, sizeof hdr) ||
        !kvc_ipc::send_all(fd, from.data(), from.size() * 4) ||
        !kvc_ipc::send_all(fd, keys.data(), keys.size()))
      die("send failed");
    char ack = 0;
    if (!kvc_ipc::recv_all(fd, &ack, 1) || ack != 'y') die("the decode side failed");
    kvc_export_release(exp);
  }
  close(fd);
  int status = 0;
  waitpid(child, &status, 0);
  kvc_cache_destroy(cache);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// ----------------------------------------------------------------- decode

int decode(int fd) {
  // The peer's pool, mapped once.
  kvc_ipc::Header share{};
  if (!kvc_ipc::recv_all(fd, &share, sizeof share) || std::memcmp(share.magic, "KVCIPC02", 8) != 0)
    die("no sharing header");
  std::vector<kvc_ipc::Chunk> chunks(share.num_chunks);
  std::vector<int> fds;
  if (!kvc_ipc::recv_fds(fd, chunks.data(), chunks.size() * sizeof(kvc_ipc::Chunk), chunks.size(),
                         &fds))
    die("the pool's descriptors did not come");
  BENCH_CUDA(cudaSetDevice(share.device_ordinal));
  BENCH_CUDA(cudaFree(nullptr));
  kvc_ipc::PeerPool peer;
  const double m0 = now_us();
  if (const char* failed = peer.map(share, chunks, fds, share.device_ordinal)) die(failed);
  const double map_us = now_us() - m0;
  kvc_cache_t* cache = make_cache();
  scatter_free_list(cache, 11);
  kvc_layer_view_t view0 = KVC_LAYER_VIEW_INIT;
  BENCH_KVC(kvc_cache_layer_view(cache, 0, &view0));
  char* mine = static_cast<char*>(view0.base);
  const std::vector<int32_t> tokens = prompt();
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  uint64_t* doff = nullptr;
  BENCH_CUDA(cudaMalloc(&doff, 2 * kBlocks * sizeof(uint64_t)));
  std::vector<double> exp_us, begin_us, copy_us, copy_wall_us, complete_us, total_us, wall_us;
  for (int rep = 0; rep < kWarmup + kReps; ++rep) {
    kvc_ipc::Header hdr{};
    if (!kvc_ipc::recv_all(fd, &hdr, sizeof hdr)) die("no header");
    std::vector<int32_t> from(hdr.num_blocks);
    std::string keys(hdr.keys_bytes, '\0');
    if (!kvc_ipc::recv_all(fd, from.data(), from.size() * 4) ||
        !kvc_ipc::recv_all(fd, &keys[0], keys.size()))
      die("truncated message");
    const double t0 = now_us();
    kvc_import_t* imp = nullptr;
    BENCH_KVC(kvc_cache_import_begin(cache, 1, tokens.data(), tokens.size(), nullptr, keys.data(),
                                     keys.size(), &imp));
    kvc_transfer_desc_t id = KVC_TRANSFER_DESC_INIT;
    BENCH_KVC(kvc_import_describe(imp, &id));
    const uint64_t count = id.num_blocks - id.first_block;
    if (count != kBlocks) die("the decode cache already held blocks of the prompt");
    std::vector<int32_t> to(count);
    size_t n = 0;
    BENCH_KVC(kvc_import_block_ids(imp, 0, to.data(), to.size(), &n));
    BENCH_CUDA(cudaDeviceSynchronize());  // import_begin's device work (default stream)
    const double t1 = now_us();
    std::vector<uint64_t> off(2 * count);
    for (uint64_t i = 0; i < count; ++i) {
      off[i] = hdr.group_offset + uint64_t(from[id.first_block + i]) * hdr.block_stride;
      off[count + i] = uint64_t(to[i]) * view0.block_stride;
    }
    BENCH_CUDA(cudaEventRecord(a, stream));
    BENCH_CUDA(cudaMemcpyAsync(doff, off.data(), off.size() * 8, cudaMemcpyHostToDevice, stream));
    BENCH_CUDA(kvc_ipc::gather_blocks(peer.ptr(), mine, doff, count, hdr.block_bytes, stream));
    BENCH_CUDA(cudaEventRecord(b, stream));
    BENCH_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    const double t3 = now_us();
    BENCH_KVC(kvc_import_complete(imp, count));
    const double t4 = now_us();
    kvc_import_destroy(imp);
    if (rep == 0 || rep == kWarmup + kReps - 1)
      std::printf(
          "decode (repetition %d): %llu blocks imported, %.1f%% of adjacent positions in "
          "adjacent block ids\n",
          rep, (unsigned long long)count, 100 * adjacency(to));
    const char ack = 'y';
    if (!kvc_ipc::send_all(fd, &ack, 1)) die("ack failed");
    BENCH_KVC(kvc_sequence_remove(cache, 1));
    BENCH_KVC(kvc_cache_reset_reuse(cache));
    if (rep < kWarmup) continue;
    exp_us.push_back(hdr.export_us);
    begin_us.push_back(t1 - t0);
    copy_us.push_back(1000.0 * ms);
    copy_wall_us.push_back(t3 - t1);
    complete_us.push_back(t4 - t3);
    // GPU time of the copy plus the host bookkeeping; and the wall clock
    // of the whole transfer (export, then import begin to complete).
    total_us.push_back(hdr.export_us + (t1 - t0) + 1000.0 * ms + (t4 - t3));
    wall_us.push_back(hdr.export_us + (t4 - t0));
  }
  BENCH_CUDA(cudaFree(doff));
  kvc_cache_destroy(cache);

  // Raw: one cudaMemcpy of the same bytes from the peer's mapped pool into
  // this process's pool (the cache is gone; its pool is reused as a plain
  // buffer through a second allocation of the same size).
  const uint64_t bytes = uint64_t(kBlocks) * kBlockBytes;
  if (bytes > peer.mapped) die("the peer's pool is smaller than the prompt");
  void* dst = nullptr;
  BENCH_CUDA(cudaMalloc(&dst, bytes));
  std::vector<double> raw_us;
  for (int rep = 0; rep < kWarmup + kReps; ++rep) {
    BENCH_CUDA(cudaEventRecord(a, stream));
    BENCH_CUDA(cudaMemcpyAsync(dst, peer.ptr(), bytes, cudaMemcpyDeviceToDevice, stream));
    BENCH_CUDA(cudaEventRecord(b, stream));
    BENCH_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    if (rep >= kWarmup) raw_us.push_back(1000.0 * ms);
  }
  BENCH_CUDA(cudaFree(dst));
  peer.unmap();

  const double raw = median(raw_us);
  const double gb = double(bytes) / 1e9;
  auto row = [&](const char* what, const std::vector<double>& v, const char* includes) {
    const double us = median(v);
    const auto mm = std::minmax_element(v.begin(), v.end());
    std::printf("| %s | %.3f | %.3f-%.3f | %.0f | %s |\n", what, us / 1000, *mm.first / 1000,
                *mm.second / 1000, gb / (us / 1e6), includes);
  };
  std::printf(
      "\n32K-token prompt, %u blocks of %llu bytes (%.2f GB), %u shared allocations mapped "
      "once in %.3f ms; medians (min-max) of %d repetitions\n\n",
      kBlocks, (unsigned long long)kBlockBytes, gb, share.num_chunks, map_us / 1000, kReps);
  std::printf("| figure | ms | min-max ms | GB/s | includes |\n|---|---|---|---|---|\n");
  row("export (prefill)", exp_us,
      "kvc_cache_export_sequence, describe, block ids, key blob (host)");
  row("import begin (decode)", begin_us,
      "kvc_cache_import_begin (blob verified, blocks reserved), describe, block ids, device sync "
      "(host)");
  row("copy (decode, GPU)", copy_us,
      "offsets upload + gather kernel, 2048 scattered blocks, peer pool to own (GPU events)");
  row("copy (decode, wall)", copy_wall_us, "the same, host clock from enqueue to the sync");
  row("import complete (decode)", complete_us, "kvc_import_complete (host)");
  row("transfer (GPU copy + host)", total_us,
      "export + import begin + copy GPU time + complete (per-repetition sums)");
  row("transfer (wall)", wall_us,
      "export + the decode side's wall clock from import begin to "
      "complete");
  row("raw cudaMemcpy", raw_us,
      "one cudaMemcpyAsync of the same bytes, peer's mapped pool to own memory (GPU events)");
  std::printf("\n| ratio (raw time / transfer time) | value | target |\n|---|---|---|\n");
  std::printf("| copy only (GPU) | %.1f%% | |\n", 100 * raw / median(copy_us));
  std::printf("| transfer (GPU copy + host) | %.1f%% | >= 80%% |\n", 100 * raw / median(total_us));
  std::printf("| transfer (wall) | %.1f%% | >= 80%% |\n", 100 * raw / median(wall_us));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--decode-fd") == 0) return decode(std::atoi(argv[2]));
  if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0) {
    std::printf("bench_ipc_transfer: skipped: no usable CUDA device\n");
    return 0;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) die("socketpair");
  const pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    close(sv[0]);
    const std::string fds = std::to_string(dup(sv[1]));
    execl("/proc/self/exe", argv[0], "--decode-fd", fds.c_str(), (char*)nullptr);
    _exit(1);
  }
  close(sv[1]);
  return prefill(sv[0], pid);
}
