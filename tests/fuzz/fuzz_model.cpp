#include "fuzz_model.h"

#include <filesystem>

#include "fuzz_emit.h"
#include "fuzz_feedback.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace kvc_fuzz {

Counters g_count;
uint32_t g_op = 0;
bool g_trace = false;
const char* g_current = nullptr;
int g_current_cache = 0;

void finding(const char* fmt, ...) {
  std::fflush(stdout);
  std::fprintf(stderr, "\n==kvcache_fuzz== FINDING during %s on cache %d (program call %llu)\n"
               "==kvcache_fuzz== ", g_current ? g_current : "(setup)", g_current_cache,
               (unsigned long long)g_count.calls);
  char why[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  std::fputs(why, stderr);
  for (char* p = why; *p != '\0'; ++p)
    if (*p == '*' && p[1] == '/') *p = '+';  // keep the C comment closed
  emit_stop(why);
  std::fprintf(stderr, "\n==kvcache_fuzz== rerun the input with KVC_FUZZ_TRACE=1 to see the program\n");
  std::fflush(stderr);
  std::abort();
}

std::string Expect::str() const {
  static const kvc_status_t all[] = {KVC_OK, KVC_ERR_INVALID_ARGUMENT, KVC_ERR_NOT_FOUND,
                                     KVC_ERR_ALREADY_EXISTS, KVC_ERR_OUT_OF_BLOCKS,
                                     KVC_ERR_BUFFER_TOO_SMALL, KVC_ERR_UNSUPPORTED,
                                     KVC_ERR_DEVICE, KVC_ERR_OUT_OF_MEMORY,
                                     KVC_ERR_INVALID_STATE, KVC_ERR_INTERNAL};
  std::string s;
  for (kvc_status_t st : all)
    if (allows(st)) s += (s.empty() ? "" : "|") + std::string(kvc_status_string(st));
  return s.empty() ? "nothing" : s;
}

namespace {

void must(kvc_status_t st, const char* what) {
  ++g_count.check_calls;
  if (st != KVC_OK)
    finding("%s failed: %s: %s", what, kvc_status_string(st), kvc_last_error_message());
}

}  // namespace

CacheModel::CacheModel(int idx, const kvc_config_t* config, bool has_host, bool manual,
                       bool reuse, bool with_events)
    : index(idx), host(has_host), manual_clock(manual), block_reuse(reuse), events(with_events) {
  must(kvc_cache_create(config, &cache), "kvc_cache_create of a valid config");
  kvc_cache_desc_init(&desc);
  must(kvc_cache_describe(cache, &desc), "kvc_cache_describe");
  T = desc.tokens_per_block;
  num_layers = desc.num_layers;
  num_groups = desc.num_groups;
  num_pools = desc.num_pools;
  kv_factor = desc.kv_factor;
  dtype = desc.dtype;
  elem_size = dtype == KVC_DTYPE_F32 ? 4 : dtype == KVC_DTYPE_FP8_E4M3 ? 1 : 2;
  static_pools = num_pools == 1 || host;
  pool_groups.assign(num_pools, 0);
  for (uint32_t g = 0; g < num_groups; ++g) {
    kvc_group_desc_t gd;
    kvc_group_desc_init(&gd);
    must(kvc_cache_describe_group(cache, g, &gd), "kvc_cache_describe_group");
    window.push_back(gd.window);
    group_pool.push_back(gd.pool);
    group_block_bytes.push_back(gd.block_bytes);
    group_first_layer.push_back(UINT32_MAX);
    ++pool_groups[gd.pool];
  }
  for (uint32_t p = 0; p < num_pools; ++p) {
    kvc_pool_desc_t pd;
    kvc_pool_desc_init(&pd);
    must(kvc_cache_describe_pool(cache, p, &pd), "kvc_cache_describe_pool");
    pools.push_back(pd);
  }
  for (uint32_t l = 0; l < num_layers; ++l) {
    kvc_layer_view_t v;
    kvc_layer_view_init(&v);
    must(kvc_cache_layer_view(cache, l, &v), "kvc_cache_layer_view");
    views.push_back(v);
    if (v.group < num_groups && group_first_layer[v.group] == UINT32_MAX) group_first_layer[v.group] = l;
    head_dim = v.head_dim;
    layer_chunk_.push_back(uint32_t(chunk_.size()));
    for (uint32_t kv = 0; kv < kv_factor; ++kv)
      for (uint32_t h = 0; h < v.kv_heads; ++h) {
        chunk_.push_back(row_bytes_);
        row_bytes_ += size_t(v.head_dim) * elem_size;
      }
  }
  for (const kvc_pool_desc_t& p : pools) {
    where_base_.push_back(where_.size());
    where_.resize(where_.size() + p.num_blocks, 0);
  }
  take(last);
  verify(last);
}

void CacheModel::relearn_pools() {
  must(kvc_cache_describe(cache, &desc), "kvc_cache_describe");
  where_.clear();
  where_base_.clear();
  for (uint32_t p = 0; p < num_pools; ++p) {
    kvc_pool_desc_t pd;
    kvc_pool_desc_init(&pd);
    must(kvc_cache_describe_pool(cache, p, &pd), "kvc_cache_describe_pool");
    if (pd.base != pools[p].base)
      finding("kvc_cache_resize moved pool %u from %p to %p", p, pools[p].base, pd.base);
    pools[p] = pd;
    where_base_.push_back(where_.size());
    where_.resize(where_.size() + pd.num_blocks, 0);
  }
  for (uint32_t l = 0; l < num_layers; ++l) {
    kvc_layer_view_t v;
    kvc_layer_view_init(&v);
    must(kvc_cache_layer_view(cache, l, &v), "kvc_cache_layer_view");
    if (v.base != views[l].base)
      finding("kvc_cache_resize moved layer %u's view from %p to %p", l, views[l].base, v.base);
    views[l] = v;
  }
  resized = true;
}

const SeqState& Snapshot::seq(uint64_t id) const {
  const auto it = std::lower_bound(seqs.begin(), seqs.end(), id,
                                   [](const std::pair<uint64_t, SeqState>& e, uint64_t k) { return e.first < k; });
  if (it == seqs.end() || it->first != id) finding("no snapshot of sequence %llu", (unsigned long long)id);
  return it->second;
}

CacheModel::~CacheModel() {
  if (!disk_dir.empty()) {
    kvc_tier_stats_t d;
    kvc_tier_stats_init(&d);
    if (kvc_cache_get_tier_stats(cache, KVC_TIER_DISK, &d) == KVC_OK) {
      g_count.disk.offered_blocks += d.offered_blocks;
      g_count.disk.stored_blocks += d.stored_blocks;
      g_count.disk.dropped_blocks += d.dropped_blocks;
      g_count.disk.hits += d.hits;
      g_count.disk.onboarded_blocks += d.onboarded_blocks;
      g_count.disk.rejected += d.rejected;
    }
#if KVC_FUZZ_DISK
    const DiskCounters c = disk_counters(cache);
    g_count.disk_deferrals += c.deferrals;
    g_count.disk_write_waits += c.write_waits;
#endif
  }
  twin.reset();
  kvc_cache_destroy(cache);
  kvc_config_destroy(config);
  if (!disk_dir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(disk_dir, ignored);
  }
}

void CacheModel::elem(unsigned char* out, uint64_t h, uint32_t layer, uint32_t kv,
                      uint32_t head, uint32_t d) const {
  const uint64_t bits = mix64(h ^ (uint64_t(layer) << 56) ^ (uint64_t(kv) << 52) ^
                              (uint64_t(head) << 44) ^ d);
  if (dtype == KVC_DTYPE_F32) {
    const uint32_t v = 0x3F800000u | uint32_t(bits & 0x7FFFFFu);  // finite, normal
    std::memcpy(out, &v, 4);
  } else if (dtype == KVC_DTYPE_F16) {
    const uint16_t v = uint16_t(0x3C00u | (bits & 0x3FFu));
    std::memcpy(out, &v, 2);
  } else {
    const uint16_t v = uint16_t(0x3F80u | (bits & 0x7Fu));
    std::memcpy(out, &v, 2);
  }
}

// The K/V of a position is a function of its scope, every token up to it
// and the extra keys begun by then: what a model would compute. Reuse that
// gives a position another's bytes is caught bit for bit.
void CacheModel::fill(SeqModel& s, uint64_t from) const {
  const uint64_t n = s.length();
  s.hash.resize(n);
  s.rows.resize(n * row_bytes_);
  for (uint64_t pos = from; pos < n; ++pos) {
    uint64_t h = pos == 0 ? s.scope : s.hash[pos - 1];
    h = mix64(h + 0x9E3779B97F4A7C15ull * (uint64_t(uint32_t(s.tokens[pos])) + 1) + (pos << 40));
    for (const ExtraKeyModel& k : s.extras) {
      if (k.offset != pos) continue;
      uint64_t kh = mix64(k.length ^ 0xE7);
      for (unsigned char c : k.data) kh = mix64(kh ^ c);
      h = mix64(h ^ kh ^ k.data.size());
    }
    s.hash[pos] = h;
    unsigned char* row = s.rows.data() + pos * row_bytes_;
    for (uint32_t l = 0; l < num_layers; ++l) {
      size_t c = layer_chunk_[l];
      for (uint32_t kv = 0; kv < kv_factor; ++kv)
        for (uint32_t hd = 0; hd < views[l].kv_heads; ++hd, ++c)
          for (uint32_t d = 0; d < views[l].head_dim; ++d)
            elem(row + chunk_[c] + size_t(d) * elem_size, h, l, kv, hd, d);
    }
  }
}

bool CacheModel::sets_fit_free(uint64_t sets) const {
  if (!static_pools) return false;
  for (uint32_t g = 0; g < num_groups; ++g)
    if (sets * pool_groups[group_pool[g]] > last.groups[g].pool_free_blocks) return false;
  return true;
}

bool CacheModel::sets_exceed_all(uint64_t sets) const {
  // Blocks write jobs hold come back to a call short of blocks (fuzz_disk.h).
  if (!static_pools || writes_hold_blocks()) return false;
  for (uint32_t p = 0; p < num_pools; ++p) {
    uint64_t free = 0, cached = 0;
    for (uint32_t g = 0; g < num_groups; ++g)
      if (group_pool[g] == p) free = last.groups[g].pool_free_blocks, cached += last.groups[g].cached_blocks;
    if (sets * pool_groups[p] > free + cached) return true;
  }
  return false;
}

void CacheModel::take(Snapshot& s) {
  ++g_count.check_calls;
  if (kvc_cache_check(cache) != KVC_OK)
    finding("kvc_cache_check (cache %d): %s", index, kvc_last_error_message());
  kvc_cache_stats_init(&s.stats);
  must(kvc_cache_get_stats(cache, &s.stats), "kvc_cache_get_stats");
  if (events) s.event_id = EventMirror::last_emitted(cache);
  s.groups.resize(num_groups);
  for (uint32_t g = 0; g < num_groups; ++g) {
    kvc_group_stats_init(&s.groups[g]);
    must(kvc_cache_get_group_stats(cache, g, &s.groups[g]), "kvc_cache_get_group_stats");
  }
  s.seqs.resize(seqs.size());
  size_t i = 0;
  for (const auto& [id, m] : seqs) {
    s.seqs[i].first = id;
    SeqState& st = s.seqs[i++].second;
    kvc_sequence_desc_init(&st.desc);
    must(kvc_sequence_describe(cache, id, &st.desc), "kvc_sequence_describe of a live sequence");
    if (st.desc.num_blocks > 100000) finding("sequence %llu has %llu blocks", (unsigned long long)id,
                                             (unsigned long long)st.desc.num_blocks);
    st.ids.resize(num_groups);
    for (uint32_t g = 0; g < num_groups; ++g) {
      st.ids[g].resize(st.desc.num_blocks);
      size_t count = 0;
      must(kvc_sequence_block_ids(cache, id, g, st.ids[g].data(), st.ids[g].size(), &count),
           "kvc_sequence_block_ids with room for num_blocks");
      if (count != st.desc.num_blocks)
        finding("sequence %llu: block_ids count %zu, describe says %llu blocks",
                (unsigned long long)id, count, (unsigned long long)st.desc.num_blocks);
    }
  }
  size_t bytes = 0;
  for (const kvc_pool_desc_t& p : pools) bytes += p.bytes;
  s.pools.resize(bytes);
  bytes = 0;
  for (const kvc_pool_desc_t& p : pools) {
    std::memcpy(s.pools.data() + bytes, p.base, p.bytes);
    bytes += p.bytes;
  }
}

void CacheModel::check_all() {
  take(scratch_);
  verify(scratch_);
  if (events) mirror.sync(cache, index, 64);
  std::swap(last, scratch_);
  resized = false;
}

void CacheModel::checked(const char* what, const Expect& e, kvc_status_t st, bool reads_only) {
  feedback(kOpStatus, g_op, uint32_t(-st) % 32);
  if (!e.allows(st))
    finding("%s (cache %d) returned %s, expected %s; message: %s", what, index,
            kvc_status_string(st), e.str().c_str(), st == KVC_OK ? "" : kvc_last_error_message());
  if (st != KVC_OK) {
    if (kvc_last_error_message()[0] == '\0') finding("%s failed with an empty message", what);
    ++g_count.failed_calls;
  }
  if (st != KVC_OK || reads_only) {
    take(scratch_);
    if (!reads_only && took_back_writes(scratch_)) ++g_count.disk_released_on_failure;
    unchanged(scratch_, what);
  }
}

// With a disk tier a change takes back the write jobs that are done (or
// waits for them) before it may fail (fuzz_disk.h): their blocks go from in
// use to cached in every group, nothing else. Accepts exactly that change
// into `last` (the state later calls are compared with).
bool CacheModel::took_back_writes(const Snapshot& now) {
  if (disk_dir.empty()) return false;
  const kvc_cache_stats_t& a = last.stats;
  const kvc_cache_stats_t& b = now.stats;
  if (b.in_use_blocks >= a.in_use_blocks || b.free_blocks != a.free_blocks ||
      b.cached_blocks - a.cached_blocks != a.in_use_blocks - b.in_use_blocks)
    return false;
  for (uint32_t g = 0; g < num_groups; ++g) {
    const kvc_group_stats_t& ga = last.groups[g];
    const kvc_group_stats_t& gb = now.groups[g];
    if (gb.in_use_blocks > ga.in_use_blocks ||
        gb.cached_blocks - ga.cached_blocks != ga.in_use_blocks - gb.in_use_blocks)
      return false;
  }
  last.stats.in_use_blocks = b.in_use_blocks;
  last.stats.cached_blocks = b.cached_blocks;
  for (uint32_t g = 0; g < num_groups; ++g) {
    last.groups[g].in_use_blocks = now.groups[g].in_use_blocks;
    last.groups[g].cached_blocks = now.groups[g].cached_blocks;
  }
  return true;
}

bool CacheModel::writes_hold_blocks() const {
#if KVC_FUZZ_DISK
  return !disk_dir.empty() && disk_writes_pending(cache);
#else
  return false;
#endif
}

void CacheModel::settle(const std::vector<uint64_t>& ids, const std::vector<uint64_t>& from,
                        bool small_buffer_first) {
  if (!ids.empty()) write_kv(ids, from, small_buffer_first);
  take(scratch_);
  verify(scratch_);
  if (events) mirror.sync(cache, index, 1 + scratch_.stats.tree_nodes % 7);
  const kvc_cache_stats_t& a = last.stats;
  const kvc_cache_stats_t& b = scratch_.stats;
  feedback(kTierMoves, bucket(b.offloaded_blocks - a.offloaded_blocks) * 6 +
                           bucket(b.onboarded_blocks - a.onboarded_blocks),
           bucket(b.evicted_blocks - a.evicted_blocks));
  feedback(kPopulation, uint32_t(std::min<size_t>(seqs.size(), 15)),
           uint32_t(std::min<size_t>(pins.size(), 7)));
  std::swap(last, scratch_);
}

void CacheModel::write_kv(const std::vector<uint64_t>& ids, const std::vector<uint64_t>& from,
                          bool small_buffer_first) {
  size_t total = 0;
  for (size_t i = 0; i < ids.size(); ++i) total += seqs.at(ids[i]).length() - from[i];
  std::vector<int64_t> slots(total + 1, -7);
  std::vector<int32_t> added(ids.size(), -7);
  std::vector<unsigned char> key, value;
  for (uint32_t g = 0; g < num_groups; ++g) {
    size_t num = 0;
    std::fill(slots.begin(), slots.end(), -7);
    std::fill(added.begin(), added.end(), -7);
    if (small_buffer_first && total > 0) {
      ++g_count.check_calls;
      const kvc_status_t st = kvc_batch_slot_mapping(cache, g, ids.data(), ids.size(),
                                                     slots.data(), total - 1, &num, added.data());
      if (st != KVC_ERR_BUFFER_TOO_SMALL || num != total || slots[0] != -7 || added[0] != -7)
        finding("slot mapping with room for %zu of %zu slots: %s, num_slots %zu, buffers %s",
                total - 1, total, kvc_status_string(st), num,
                slots[0] != -7 || added[0] != -7 ? "written" : "untouched");
    }
    must(kvc_batch_slot_mapping(cache, g, ids.data(), ids.size(), slots.data(), total, &num,
                                added.data()),
         "kvc_batch_slot_mapping of the new tokens");
    if (num != total) finding("slot mapping of group %u: %zu slots, the shadow adds %zu", g, num, total);
    // Each slot is the position's block and row, -1 where reused.
    size_t at = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const SeqModel& m = seqs.at(ids[i]);
      if (uint64_t(added[i]) != m.length() - from[i])
        finding("slot mapping: new_tokens[%zu] = %d, the shadow adds %llu", i, added[i],
                (unsigned long long)(m.length() - from[i]));
      std::vector<int32_t> blocks(blocks_for(m.length()));
      size_t count = 0;
      must(kvc_sequence_block_ids(cache, ids[i], g, blocks.data(), blocks.size(), &count),
           "kvc_sequence_block_ids");
      for (uint64_t pos = from[i]; pos < m.length(); ++pos, ++at) {
        const int32_t blk = blocks[pos / T];
        const int64_t want = pos < m.cached || blk < 0 ? -1 : int64_t(blk) * T + int64_t(pos % T);
        if (slots[at] != want)
          finding("slot mapping of group %u: sequence %llu position %llu (cached %llu) got slot "
                  "%lld, expected %lld", g, (unsigned long long)ids[i], (unsigned long long)pos,
                  (unsigned long long)m.cached, (long long)slots[at], (long long)want);
      }
    }
    for (uint32_t l = 0; l < num_layers; ++l) {
      const kvc_layer_view_t& v = views[l];
      if (v.group != g) continue;
      const size_t chunk = size_t(v.head_dim) * elem_size;
      key.assign(total * v.kv_heads * chunk + 1, 0xEE);
      value.assign(total * v.kv_heads * chunk + 1, 0xEE);
      size_t t = 0;
      for (size_t i = 0; i < ids.size(); ++i) {
        const SeqModel& m = seqs.at(ids[i]);
        for (uint64_t pos = from[i]; pos < m.length(); ++pos, ++t)
          for (uint32_t h = 0; h < v.kv_heads; ++h) {
            const unsigned char* row = m.rows.data() + pos * row_bytes_;
            std::memcpy(&key[(t * v.kv_heads + h) * chunk], row + chunk_[layer_chunk_[l] + h], chunk);
            if (kv_factor == 2)
              std::memcpy(&value[(t * v.kv_heads + h) * chunk],
                          row + chunk_[layer_chunk_[l] + v.kv_heads + h], chunk);
          }
      }
      kvc_store_args_t a;
      kvc_store_args_init(&a);
      a.layer = l;
      a.num_tokens = uint32_t(total);
      a.src_dtype = dtype;
      a.key = key.data();
      a.value = kv_factor == 2 ? value.data() : nullptr;
      a.slot_mapping = slots.data();
      // One write in four through kvc_store_kv_strided for each source
      // shape (the bytes checks after it see what it stored).
      const uint32_t shape = total == 0 ? 0 : uint32_t(l + total + from[0]) % 4;
      if (shape == 0) {
        must(kvc_store_kv(cache, &a, nullptr), "kvc_store_kv of the new tokens");
        continue;
      }
      const int64_t H = v.kv_heads, D = v.head_dim, n = int64_t(total);
      kvc_store_strides_t st;
      kvc_store_strides_init(&st);
      int64_t base = 0, elems = 0, nseq = 1;
      if (shape == 1) {  // head-major [H][n][D] (transformers' layout)
        st.key_head_stride = n * D, st.key_token_stride = D;
        elems = H * n * D;
      } else if (shape == 2) {  // tokens last to first, a spare head between them
        st.key_token_stride = -(H + 1) * D, st.key_head_stride = D;
        base = (n - 1) * (H + 1) * D, elems = n * (H + 1) * D;
      } else {  // two sequences (when n is even) [b][H][n/b][D], a gap between them
        nseq = n % 2 == 0 ? 2 : 1;
        st.seq_len = uint32_t(n / nseq);
        st.key_seq_stride = H * (n / nseq) * D + D, st.key_head_stride = (n / nseq) * D,
        st.key_token_stride = D;
        elems = nseq * st.key_seq_stride;
      }
      st.value_seq_stride = st.key_seq_stride, st.value_token_stride = st.key_token_stride,
      st.value_head_stride = st.key_head_stride;
      std::vector<unsigned char> skey(size_t(elems) * elem_size, 0xEE), sval(skey.size(), 0xEE);
      const int64_t per = n / nseq;
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t e = base + (t / per) * st.key_seq_stride + (t % per) * st.key_token_stride +
                            h * st.key_head_stride;
          std::memcpy(&skey[size_t(e) * elem_size], &key[size_t(t * H + h) * chunk], chunk);
          std::memcpy(&sval[size_t(e) * elem_size], &value[size_t(t * H + h) * chunk], chunk);
        }
      a.key = skey.data() + base * elem_size;
      a.value = kv_factor == 2 ? sval.data() + base * elem_size : nullptr;
      must(kvc_store_kv_strided(cache, &a, &st, nullptr), "kvc_store_kv_strided of the new tokens");
    }
  }
}

}  // namespace kvc_fuzz
