// CUDA IPC transport for kvcache/transfer.h between two processes on one
// GPU: a "prefill" process computes (here: writes deterministic K/V for) a
// 4096-token prompt, commits and exports it, and shares its pool's memory
// (kvc_cache_describe_pool_share, kvc_cache_export_pool_chunk: a POSIX file
// descriptor per physical allocation); a "decode" process (this program
// exec'd again, talking over a Unix-domain socketpair that carries the
// descriptors, SCM_RIGHTS) verifies the key blob against ITS OWN tokens,
// maps the sender's pool (cuMemImportFromShareableHandle, cuMemMap), copies
// the exported blocks straight into its import block ids with one gather
// kernel (one copy, no staging), completes the import, and checks that an
// add of the prompt reuses every block, bit for bit.
//
// The prefill cache starts with room for half the prompt and grows
// (kvc_cache_resize) before the prompt comes, so its pool is two physical
// allocations and the prompt's blocks lie in both.
//
//   cuda_ipc_transfer              the transfer; exit 0 when verified
//   cuda_ipc_transfer --mismatch   the decode prompt differs in one token of
//                                  block 37: the import is refused naming the
//                                  block, the decode cache unchanged
//   cuda_ipc_transfer --abort      the decode side copies, then aborts: its
//                                  cache is as before (check, stats), and the
//                                  prompt is not reusable
//
// Exit status: 0 verified, 1 failure, 2 usage or no CUDA device, 3 the
// pool cannot be shared here (the reason printed: a driver or container
// without POSIX file descriptor handles). Uses only the public C API (the
// library is linked shared) and the CUDA driver API for the mapping.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ipc_transport.cuh"
#include "kvcache/kvcache.h"

namespace {

constexpr uint32_t kLayers = 4, kHeads = 4, kDim = 128, kT = 16;
constexpr uint32_t kTokens = 4096, kBlocks = kTokens / kT;
constexpr uint32_t kMismatchBlock = 37;

enum class Mode { kTransfer, kMismatch, kAbort };

const char* mode_flag(Mode m) {
  switch (m) {
    case Mode::kMismatch:
      return "--mismatch";
    case Mode::kAbort:
      return "--abort";
    default:
      return "";
  }
}

int fail(const char* role, const char* what) {
  std::fprintf(stderr, "cuda_ipc_transfer %s: %s: %s\n", role, what, kvc_last_error_message());
  return 1;
}

int cuda_fail(const char* role, const char* what, cudaError_t e) {
  std::fprintf(stderr, "cuda_ipc_transfer %s: %s: %s\n", role, what, cudaGetErrorString(e));
  return 1;
}

std::vector<int32_t> prompt() {
  std::vector<int32_t> t(kTokens);
  for (uint32_t i = 0; i < kTokens; ++i) t[i] = int32_t(1000 + (i * 7919u) % 50000u);
  return t;
}

// The bf16 bits of element (layer, kv, token, head, d): a hash, exponent
// held so that no value is a NaN or an infinity.
uint16_t value_bits(uint32_t layer, uint32_t kv, uint32_t token, uint32_t head, uint32_t d) {
  uint32_t h = layer * 0x9E3779B1u ^ kv * 0x85EBCA77u ^ token * 0xC2B2AE3Du ^ head * 0x27D4EB2Fu ^
               d * 0x165667B1u;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  return uint16_t((h & 0x807Fu) | 0x3F00u);
}

constexpr uint64_t kBlockBytes = uint64_t(kLayers) * 2 * kT * kHeads * kDim * 2;

// A cache with room for `blocks` blocks, growable to `max_blocks`.
kvc_cache_t* make_cache(uint64_t blocks, uint64_t max_blocks) {
  kvc_config_t* cfg = nullptr;
  if (kvc_config_create(&cfg) != KVC_OK) return nullptr;
  kvc_config_set_num_layers(cfg, kLayers);
  kvc_config_set_kv_heads(cfg, kHeads);
  kvc_config_set_head_dim(cfg, kDim);
  kvc_config_set_dtype(cfg, KVC_DTYPE_BF16);
  kvc_config_set_tokens_per_block(cfg, kT);
  kvc_config_set_device(cfg, KVC_DEVICE_CUDA, 0);
  kvc_config_set_primary_bytes(cfg, blocks * kBlockBytes);
  kvc_config_set_max_primary_bytes(cfg, max_blocks * kBlockBytes);
  kvc_cache_t* cache = nullptr;
  const kvc_status_t s = kvc_cache_create(cfg, &cache);
  kvc_config_destroy(cfg);
  return s == KVC_OK ? cache : nullptr;
}

// ---------------------------------------------------------------- prefill

int prefill(Mode mode, int fd) {
  const char* R = "prefill";
  // Room for half the prompt, then grown: the pool is two allocations.
  kvc_cache_t* cache = make_cache(kBlocks / 2, 2 * kBlocks);
  if (cache == nullptr) return fail(R, "kvc_cache_create");
  if (kvc_cache_resize(cache, (kBlocks + kBlocks / 4) * kBlockBytes) != KVC_OK)
    return fail(R, "kvc_cache_resize");
  const std::vector<int32_t> tokens = prompt();
  uint64_t cached = 0;
  if (kvc_sequence_add(cache, 1, tokens.data(), tokens.size(), nullptr, nullptr, &cached) != KVC_OK)
    return fail(R, "kvc_sequence_add");
  std::vector<int32_t> ids(kBlocks + 1);
  size_t n = 0;
  if (kvc_sequence_block_ids(cache, 1, 0, ids.data(), ids.size(), &n) != KVC_OK || n != kBlocks)
    return fail(R, "kvc_sequence_block_ids");

  // "Prefill": K and V of every layer written with kvc_store_kv.
  std::vector<int64_t> slots(kTokens);
  for (uint32_t t = 0; t < kTokens; ++t) slots[t] = int64_t(ids[t / kT]) * kT + t % kT;
  const size_t elems = size_t(kTokens) * kHeads * kDim;
  std::vector<uint16_t> k(elems), v(elems);
  void *dk = nullptr, *dv = nullptr, *dslots = nullptr;
  cudaError_t e = cudaMalloc(&dk, elems * 2);
  if (e == cudaSuccess) e = cudaMalloc(&dv, elems * 2);
  if (e == cudaSuccess) e = cudaMalloc(&dslots, kTokens * sizeof(int64_t));
  if (e == cudaSuccess)
    e = cudaMemcpy(dslots, slots.data(), kTokens * sizeof(int64_t), cudaMemcpyHostToDevice);
  if (e != cudaSuccess) return cuda_fail(R, "staging buffers", e);
  for (uint32_t l = 0; l < kLayers; ++l) {
    for (uint32_t t = 0; t < kTokens; ++t)
      for (uint32_t h = 0; h < kHeads; ++h)
        for (uint32_t d = 0; d < kDim; ++d) {
          k[(size_t(t) * kHeads + h) * kDim + d] = value_bits(l, 0, t, h, d);
          v[(size_t(t) * kHeads + h) * kDim + d] = value_bits(l, 1, t, h, d);
        }
    if ((e = cudaMemcpy(dk, k.data(), elems * 2, cudaMemcpyHostToDevice)) != cudaSuccess ||
        (e = cudaMemcpy(dv, v.data(), elems * 2, cudaMemcpyHostToDevice)) != cudaSuccess)
      return cuda_fail(R, "K/V upload", e);
    kvc_store_args_t a = KVC_STORE_ARGS_INIT;
    a.layer = l;
    a.num_tokens = kTokens;
    a.src_dtype = KVC_DTYPE_BF16;
    a.key = dk;
    a.value = dv;
    a.slot_mapping = static_cast<const int64_t*>(dslots);
    if (kvc_store_kv(cache, &a, nullptr) != KVC_OK) return fail(R, "kvc_store_kv");
    // The staging buffers are refilled for the next layer: let the store
    // read them first.
    if ((e = cudaDeviceSynchronize()) != cudaSuccess) return cuda_fail(R, "store", e);
  }
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return cuda_fail(R, "store", e);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(dslots);
  if (kvc_sequence_commit(cache, 1, kTokens) != KVC_OK) return fail(R, "kvc_sequence_commit");

  kvc_export_t* exp = nullptr;
  if (kvc_cache_export_sequence(cache, 1, 0, &exp) != KVC_OK)
    return fail(R, "kvc_cache_export_sequence");
  kvc_transfer_desc_t ed = KVC_TRANSFER_DESC_INIT;
  kvc_group_desc_t g = KVC_GROUP_DESC_INIT;
  if (kvc_export_describe(exp, &ed) != KVC_OK || kvc_cache_describe_group(cache, 0, &g) != KVC_OK)
    return fail(R, "describe");
  if (ed.num_groups != 1) {
    std::fprintf(stderr, "cuda_ipc_transfer prefill: %u layer groups: this example moves one\n",
                 ed.num_groups);
    return 1;
  }
  std::vector<int32_t> from(ed.num_blocks);
  std::string keys(ed.keys_bytes, '\0');
  size_t size = 0;
  if (kvc_export_block_ids(exp, 0, from.data(), from.size(), &n) != KVC_OK ||
      kvc_export_keys(exp, &keys[0], keys.size(), &size) != KVC_OK)
    return fail(R, "export ids and keys");

  // Share the pool group 0's blocks live in: a descriptor per allocation.
  kvc_layer_view_t view0 = KVC_LAYER_VIEW_INIT;
  kvc_pool_desc_t pool = KVC_POOL_DESC_INIT;
  if (kvc_cache_layer_view(cache, 0, &view0) != KVC_OK ||
      kvc_cache_describe_pool(cache, view0.pool, &pool) != KVC_OK)
    return fail(R, "layer view and pool");
  kvc_ipc::Header hdr{};
  std::memcpy(hdr.magic, "KVCIPC02", 8);
  std::vector<kvc_ipc::Chunk> chunks;
  std::vector<int> fds;
  if (!kvc_ipc::share_pool(cache, 0, view0.pool, &hdr, &chunks, &fds)) {
    std::printf("cuda_ipc_transfer prefill: cannot share the pool: %s\n", kvc_last_error_message());
    return 3;
  }
  char* pool_base = static_cast<char*>(pool.base);
  hdr.group_offset = uint64_t(static_cast<char*>(view0.base) - pool_base);
  hdr.block_stride = view0.block_stride;
  hdr.block_bytes = g.block_bytes;
  hdr.num_blocks = ed.num_blocks;
  hdr.keys_bytes = ed.keys_bytes;
  hdr.num_layers = kLayers;
  hdr.tokens_per_block = ed.tokens_per_block;
  std::vector<kvc_ipc::LayerPlace> places(kLayers);
  for (uint32_t l = 0; l < kLayers; ++l) {
    kvc_layer_view_t vw = KVC_LAYER_VIEW_INIT;
    if (kvc_cache_layer_view(cache, l, &vw) != KVC_OK) return fail(R, "kvc_cache_layer_view");
    places[l] = {uint64_t(static_cast<char*>(vw.base) - pool_base), vw.block_stride};
  }
  const bool sent =
      kvc_ipc::send_all(fd, &hdr, sizeof hdr) &&
      kvc_ipc::send_fds(fd, chunks.data(), chunks.size() * sizeof(kvc_ipc::Chunk), fds) &&
      kvc_ipc::send_all(fd, from.data(), from.size() * 4) &&
      kvc_ipc::send_all(fd, places.data(), places.size() * sizeof(kvc_ipc::LayerPlace)) &&
      kvc_ipc::send_all(fd, keys.data(), keys.size());
  for (int d : fds) close(d);  // the decode process holds its own copies
  if (!sent) {
    std::fprintf(stderr, "cuda_ipc_transfer prefill: send failed\n");
    return 1;
  }
  // The decode side copies out of this cache's pool: keep the export (and
  // the process) until it says it is done.
  char ack = 0;
  const bool got = kvc_ipc::recv_all(fd, &ack, 1);
  kvc_export_release(exp);
  if (kvc_sequence_remove(cache, 1) != KVC_OK || kvc_cache_check(cache) != KVC_OK)
    return fail(R, "remove and check");
  kvc_cache_destroy(cache);
  if (!got || ack != 'y') {
    std::fprintf(stderr, "cuda_ipc_transfer prefill: the decode side did not finish\n");
    return 1;
  }
  std::printf("cuda_ipc_transfer prefill: exported %" PRIu64 " blocks (%" PRIu64
              " bytes) from a pool of %u shared allocations\n",
              ed.num_blocks, ed.num_blocks * g.block_bytes, hdr.num_chunks);
  return 0;
}

// ----------------------------------------------------------------- decode

bool same_stats(const kvc_cache_stats_t& a, const kvc_cache_stats_t& b) {
  return a.free_blocks == b.free_blocks && a.cached_blocks == b.cached_blocks &&
         a.in_use_blocks == b.in_use_blocks && a.reused_blocks == b.reused_blocks &&
         a.missed_blocks == b.missed_blocks && a.num_sequences == b.num_sequences &&
         a.tree_nodes == b.tree_nodes && a.evicted_blocks == b.evicted_blocks;
}

int decode(Mode mode, int fd) {
  const char* R = "decode";
  kvc_ipc::Header hdr{};
  if (!kvc_ipc::recv_all(fd, &hdr, sizeof hdr) || std::memcmp(hdr.magic, "KVCIPC02", 8) != 0) {
    std::fprintf(stderr, "cuda_ipc_transfer decode: no header: the prefill side sent nothing\n");
    return 1;
  }
  std::vector<kvc_ipc::Chunk> chunks(hdr.num_chunks);
  std::vector<int> fds;
  if (!kvc_ipc::recv_fds(fd, chunks.data(), chunks.size() * sizeof(kvc_ipc::Chunk), chunks.size(),
                         &fds)) {
    std::fprintf(stderr, "cuda_ipc_transfer decode: the pool's descriptors did not come\n");
    return 1;
  }
  // Map the sender's pool now (a server would keep it mapped for every
  // transfer from that peer). The descriptors are closed either way. The
  // driver calls use the runtime's context of the device, made current.
  if (cudaSetDevice(hdr.device_ordinal) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "cuda_ipc_transfer decode: cannot use cuda:%d\n", hdr.device_ordinal);
    return 1;
  }
  kvc_ipc::PeerPool peer;
  if (const char* failed = peer.map(hdr, chunks, fds, hdr.device_ordinal)) {
    std::fprintf(stderr, "cuda_ipc_transfer decode: mapping the peer's pool: %s failed\n", failed);
    return 1;
  }
  std::vector<int32_t> from(hdr.num_blocks);
  std::vector<kvc_ipc::LayerPlace> places(hdr.num_layers);
  std::string keys(hdr.keys_bytes, '\0');
  if (!kvc_ipc::recv_all(fd, from.data(), from.size() * 4) ||
      !kvc_ipc::recv_all(fd, places.data(), places.size() * sizeof(kvc_ipc::LayerPlace)) ||
      !kvc_ipc::recv_all(fd, &keys[0], keys.size())) {
    std::fprintf(stderr, "cuda_ipc_transfer decode: truncated message\n");
    return 1;
  }
  kvc_cache_t* cache = make_cache(2 * kBlocks, 2 * kBlocks);
  if (cache == nullptr) return fail(R, "kvc_cache_create");
  kvc_layer_view_t view0 = KVC_LAYER_VIEW_INIT;
  if (kvc_cache_layer_view(cache, 0, &view0) != KVC_OK) return fail(R, "kvc_cache_layer_view");
  // Same geometry: each layer sits at the same place relative to layer 0.
  const kvc_layer_view_t init = KVC_LAYER_VIEW_INIT;
  std::vector<kvc_layer_view_t> views(kLayers, init);
  for (uint32_t l = 0; l < kLayers; ++l) {
    if (kvc_cache_layer_view(cache, l, &views[l]) != KVC_OK) return fail(R, "layer view");
    const uint64_t mine =
        uint64_t(static_cast<char*>(views[l].base) - static_cast<char*>(view0.base));
    if (hdr.num_layers != kLayers || places[l].offset - hdr.group_offset != mine ||
        places[l].block_stride != views[l].block_stride) {
      std::fprintf(stderr, "cuda_ipc_transfer decode: layer %u lies elsewhere in the peer's pool\n",
                   l);
      return 1;
    }
  }
  kvc_cache_stats_t before = KVC_CACHE_STATS_INIT;
  kvc_cache_get_stats(cache, &before);

  std::vector<int32_t> tokens = prompt();
  if (mode == Mode::kMismatch) tokens[kMismatchBlock * kT + 5] += 1;
  // The prompt and the first generated token: an add never reports a
  // prompt's last token cached, so with it every prompt block can be.
  std::vector<int32_t> next = tokens;
  next.push_back(77);
  kvc_import_t* imp = nullptr;
  const kvc_status_t s = kvc_cache_import_begin(cache, 1, tokens.data(), tokens.size(), nullptr,
                                                keys.data(), keys.size(), &imp);
  if (mode == Mode::kMismatch) {
    const std::string msg = kvc_last_error_message();
    kvc_cache_stats_t after = KVC_CACHE_STATS_INIT;
    kvc_cache_get_stats(cache, &after);
    const bool named = msg.find("block " + std::to_string(kMismatchBlock)) != std::string::npos;
    if (s != KVC_ERR_INVALID_ARGUMENT || imp != nullptr || !named || !same_stats(before, after) ||
        kvc_cache_check(cache) != KVC_OK) {
      std::fprintf(stderr,
                   "cuda_ipc_transfer decode: mismatched prompt not refused as expected "
                   "(status %s, message \"%s\")\n",
                   kvc_status_string(s), msg.c_str());
      return 1;
    }
    std::printf("cuda_ipc_transfer decode: refused: %s\n", msg.c_str());
    std::printf("cuda_ipc_transfer decode: cache unchanged (check passes, stats equal)\n");
    kvc_cache_destroy(cache);
    peer.unmap();
    char ack = 'y';
    kvc_ipc::send_all(fd, &ack, 1);
    return 0;
  }
  if (s != KVC_OK) return fail(R, "kvc_cache_import_begin");
  kvc_transfer_desc_t id = KVC_TRANSFER_DESC_INIT;
  if (kvc_import_describe(imp, &id) != KVC_OK) return fail(R, "kvc_import_describe");
  const uint64_t count = id.num_blocks - id.first_block;
  std::vector<int32_t> to(count);
  size_t n = 0;
  if (kvc_import_block_ids(imp, 0, to.data(), to.size(), &n) != KVC_OK)
    return fail(R, "kvc_import_block_ids");

  cudaError_t e = cudaDeviceSynchronize();  // import_begin's device work (default stream)
  if (e != cudaSuccess) return cuda_fail(R, "synchronize", e);
  // Source: the export's block in the peer's pool; destination: the
  // import's block in this cache's pool. One kernel copies them all.
  std::vector<uint64_t> off(2 * count);
  char* mine = static_cast<char*>(view0.base);
  for (uint64_t i = 0; i < count; ++i) {
    off[i] = hdr.group_offset + uint64_t(from[id.first_block + i]) * hdr.block_stride;
    off[count + i] = uint64_t(to[i]) * view0.block_stride;
  }
  uint64_t* doff = nullptr;
  if ((e = cudaMalloc(&doff, off.size() * 8)) != cudaSuccess ||
      (e = cudaMemcpy(doff, off.data(), off.size() * 8, cudaMemcpyHostToDevice)) != cudaSuccess ||
      (e = kvc_ipc::gather_blocks(peer.ptr(), mine, doff, count, hdr.block_bytes, nullptr)) !=
          cudaSuccess ||
      (e = cudaDeviceSynchronize()) != cudaSuccess)
    return cuda_fail(R, "gather", e);
  cudaFree(doff);
  peer.unmap();
  char ack = 'y';
  kvc_ipc::send_all(fd, &ack, 1);  // the prefill side may release its export

  if (mode == Mode::kAbort) {
    if (kvc_import_abort(imp) != KVC_OK) return fail(R, "kvc_import_abort");
    kvc_import_destroy(imp);
    kvc_cache_stats_t after = KVC_CACHE_STATS_INIT;
    kvc_cache_get_stats(cache, &after);
    if (!same_stats(before, after) || kvc_cache_check(cache) != KVC_OK) {
      std::fprintf(stderr, "cuda_ipc_transfer decode: the aborted import changed the cache\n");
      return 1;
    }
    uint64_t cached = 0;
    if (kvc_sequence_add(cache, 2, next.data(), next.size(), nullptr, nullptr, &cached) != KVC_OK ||
        cached != 0) {
      std::fprintf(stderr,
                   "cuda_ipc_transfer decode: after abort an add reused %" PRIu64 " tokens\n",
                   cached);
      return 1;
    }
    std::printf("cuda_ipc_transfer decode: aborted import of %" PRIu64
                " blocks: cache unchanged (check passes, stats equal, nothing reusable)\n",
                count);
    kvc_cache_destroy(cache);
    return 0;
  }

  if (kvc_import_complete(imp, count) != KVC_OK) return fail(R, "kvc_import_complete");
  kvc_import_destroy(imp);
  if (kvc_sequence_remove(cache, 1) != KVC_OK) return fail(R, "kvc_sequence_remove");

  // Any add of the prompt now reuses every block; check their bytes.
  uint64_t cached = 0;
  if (kvc_sequence_add(cache, 2, next.data(), next.size(), nullptr, nullptr, &cached) != KVC_OK)
    return fail(R, "kvc_sequence_add");
  if (cached != uint64_t(kTokens)) {
    std::fprintf(stderr, "cuda_ipc_transfer decode: add reused %" PRIu64 " of %u tokens\n", cached,
                 kTokens);
    return 1;
  }
  std::vector<int32_t> ids(kBlocks + 2);
  if (kvc_sequence_block_ids(cache, 2, 0, ids.data(), ids.size(), &n) != KVC_OK || n != kBlocks + 1)
    return fail(R, "kvc_sequence_block_ids");
  std::vector<char> block(hdr.block_bytes);
  uint64_t bad = 0;
  for (uint32_t b = 0; b < kBlocks; ++b) {
    if ((e = cudaMemcpy(block.data(), mine + uint64_t(ids[b]) * view0.block_stride, block.size(),
                        cudaMemcpyDeviceToHost)) != cudaSuccess)
      return cuda_fail(R, "read back", e);
    for (uint32_t l = 0; l < kLayers; ++l) {
      const kvc_layer_view_t& vw = views[l];
      const char* lb = block.data() + (static_cast<char*>(vw.base) - mine);
      for (uint32_t kv = 0; kv < 2; ++kv)
        for (uint32_t t = 0; t < kT; ++t)
          for (uint32_t h = 0; h < kHeads; ++h)
            for (uint32_t d = 0; d < kDim; ++d) {
              uint16_t got;
              std::memcpy(&got,
                          lb + kv * vw.kv_stride + t * vw.token_stride + h * vw.head_stride + d * 2,
                          2);
              if (got != value_bits(l, kv, b * kT + t, h, d) && bad++ < 5)
                std::fprintf(stderr,
                             "cuda_ipc_transfer decode: block %u layer %u kv %u token "
                             "%u head %u dim %u differs\n",
                             b, l, kv, t, h, d);
            }
    }
  }
  if (bad != 0) {
    std::fprintf(stderr, "cuda_ipc_transfer decode: %" PRIu64 " elements differ\n", bad);
    return 1;
  }
  if (kvc_sequence_remove(cache, 2) != KVC_OK || kvc_cache_check(cache) != KVC_OK)
    return fail(R, "remove and check");
  std::printf("cuda_ipc_transfer decode: imported %" PRIu64
              " blocks over CUDA IPC (%u allocations mapped); an add of "
              "the prompt reused all %u blocks, bit for bit\n",
              count, hdr.num_chunks, kBlocks);
  kvc_cache_destroy(cache);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Mode mode = Mode::kTransfer;
  int decode_fd = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mismatch")
      mode = Mode::kMismatch;
    else if (a == "--abort")
      mode = Mode::kAbort;
    else if (a == "--decode-fd" && i + 1 < argc)
      decode_fd = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--mismatch|--abort]\n", argv[0]);
      return 2;
    }
  }
  if (decode_fd >= 0) return decode(mode, decode_fd);

  if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0) {
    std::printf("cuda_ipc_transfer: skipped: no usable CUDA device\n");
    return 2;
  }
  // The decode process: this program again, exec'd with one end of a
  // socketpair (fork + exec, so the child starts its own CUDA context).
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    std::perror("socketpair");
    return 1;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return 1;
  }
  if (pid == 0) {
    close(sv[0]);
    const int fd = dup(sv[1]);  // without CLOEXEC
    const std::string fds = std::to_string(fd);
    const char* flag = mode_flag(mode);
    if (flag[0] != '\0')
      execl("/proc/self/exe", argv[0], "--decode-fd", fds.c_str(), flag, (char*)nullptr);
    else
      execl("/proc/self/exe", argv[0], "--decode-fd", fds.c_str(), (char*)nullptr);
    std::perror("execl");
    _exit(1);
  }
  close(sv[1]);
  const int rc = prefill(mode, sv[0]);
  close(sv[0]);  // a decode side still waiting sees end of file
  int status = 0;
  waitpid(pid, &status, 0);
  const int child = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  if (rc == 3) return 3;
  if (rc != 0 || child != 0) {
    std::fprintf(stderr, "cuda_ipc_transfer: failed (prefill %d, decode %d)\n", rc, child);
    return 1;
  }
  std::printf("cuda_ipc_transfer: ok\n");
  return 0;
}
