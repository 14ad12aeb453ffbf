// The checks of fuzz_model.h after a call: a snapshot unchanged after a
// failed call or one that only reads; after a change, the statistics adding
// up, every sequence as the shadow says, block ids in range and never at two
// places, and every K/V byte of every live sequence and export as written.
#include "fuzz_model.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace kvc_fuzz {

namespace {

#define KVC_STATS_FIELDS(X)                                                                    \
  X(num_blocks) X(free_blocks) X(cached_blocks) X(in_use_blocks) X(reused_blocks)              \
  X(missed_blocks) X(evicted_blocks) X(num_sequences) X(num_pinned) X(tree_nodes)              \
  X(offloaded_blocks) X(onboarded_blocks) X(offloaded_bytes) X(onboarded_bytes) X(host_blocks) \
  X(host_free_blocks) X(host_cached_blocks)
#define KVC_GROUP_FIELDS(X)                                                              \
  X(pool) X(in_use_blocks) X(cached_blocks) X(pool_free_blocks) X(reused_blocks) \
  X(missed_blocks) X(evicted_blocks) X(released_blocks)

}  // namespace

void CacheModel::unchanged(const Snapshot& now, const char* what) const {
  const Snapshot& was = last;
#define X(f)                                                                               \
  if (now.stats.f != was.stats.f)                                                          \
    finding("%s (cache %d) changed stats." #f ": %llu -> %llu", what, index,               \
            (unsigned long long)was.stats.f, (unsigned long long)now.stats.f);
  KVC_STATS_FIELDS(X)
#undef X
  for (uint32_t g = 0; g < num_groups; ++g) {
#define X(f)                                                                               \
  if (now.groups[g].f != was.groups[g].f)                                                  \
    finding("%s (cache %d) changed group %u stats." #f ": %llu -> %llu", what, index, g,   \
            (unsigned long long)was.groups[g].f, (unsigned long long)now.groups[g].f);
    KVC_GROUP_FIELDS(X)
#undef X
  }
  if (now.event_id != was.event_id)
    finding("%s (cache %d) emitted events %llu..%llu", what, index,
            (unsigned long long)was.event_id + 1, (unsigned long long)now.event_id);
  if (now.seqs.size() != was.seqs.size()) finding("%s (cache %d) changed the sequences", what, index);
  for (size_t i = 0; i < now.seqs.size(); ++i) {
    const uint64_t id = now.seqs[i].first;
    const SeqState& st = now.seqs[i].second;
    const SeqState& old = was.seqs[i].second;
    if (was.seqs[i].first != id) finding("%s (cache %d) changed the sequences", what, index);
    if (std::memcmp(&st.desc, &old.desc, sizeof(st.desc)) != 0)
      finding("%s (cache %d) changed the description of sequence %llu (length %llu -> %llu, "
              "committed %llu -> %llu)", what, index, (unsigned long long)id,
              (unsigned long long)old.desc.num_tokens, (unsigned long long)st.desc.num_tokens,
              (unsigned long long)old.desc.committed_tokens,
              (unsigned long long)st.desc.committed_tokens);
    if (st.ids != old.ids)
      finding("%s (cache %d) changed the block ids of sequence %llu", what, index,
              (unsigned long long)id);
  }
  if (now.pools != was.pools) {
    size_t i = 0;
    while (now.pools[i] == was.pools[i]) ++i;
    finding("%s (cache %d) changed pool memory (first at byte %zu)", what, index, i);
  }
}

void CacheModel::verify(const Snapshot& now) {
  const kvc_cache_stats_t& s = now.stats;
  const kvc_cache_stats_t& w = last.stats;
  if (s.free_blocks + s.cached_blocks + s.in_use_blocks != s.num_blocks)
    finding("stats: free %llu + cached %llu + in use %llu != %llu blocks",
            (unsigned long long)s.free_blocks, (unsigned long long)s.cached_blocks,
            (unsigned long long)s.in_use_blocks, (unsigned long long)s.num_blocks);
  if (s.host_free_blocks + s.host_cached_blocks != s.host_blocks)
    finding("stats: host free %llu + host cached %llu != %llu host blocks",
            (unsigned long long)s.host_free_blocks, (unsigned long long)s.host_cached_blocks,
            (unsigned long long)s.host_blocks);
  if (s.reserved != 0) finding("stats.reserved is %u", s.reserved);
  if (s.num_sequences != seqs.size() || s.num_pinned != pins.size())
    finding("stats: %llu sequences and %llu pins, the shadow has %zu and %zu",
            (unsigned long long)s.num_sequences, (unsigned long long)s.num_pinned, seqs.size(),
            pins.size());
  const uint64_t asked = s.reused_blocks + s.missed_blocks;
  const double rate = asked == 0 ? 0.0 : double(s.reused_blocks) / double(asked);
  if (s.hit_rate != rate) finding("stats: hit_rate %g, reused/(reused+missed) is %g", s.hit_rate, rate);
  if (&now != &last) {
#define X(f)                                                                    \
  if (s.f < w.f)                                                                \
    finding("stats." #f " went down: %llu -> %llu", (unsigned long long)w.f,    \
            (unsigned long long)s.f);
    X(reused_blocks) X(missed_blocks) X(evicted_blocks) X(offloaded_blocks) X(onboarded_blocks)
    X(offloaded_bytes) X(onboarded_bytes)
#undef X
    if (static_pools && !resized && s.num_blocks != w.num_blocks) finding("stats.num_blocks changed");
    if (s.host_blocks != w.host_blocks) finding("stats.host_blocks changed");
  }
  if (host != (s.host_blocks > 0)) finding("host tier %d but %llu host blocks", host,
                                           (unsigned long long)s.host_blocks);
  // Groups: their blocks add up to the cache's.
  uint64_t in_use = 0, cached = 0, free = 0;
  std::vector<int> pool_seen(num_pools, 0);
  for (uint32_t g = 0; g < num_groups; ++g) {
    const kvc_group_stats_t& gs = now.groups[g];
    in_use += gs.in_use_blocks;
    cached += gs.cached_blocks;
    if (gs.pool != group_pool[g]) finding("group %u stats: pool %u, described %u", g, gs.pool, group_pool[g]);
    if (!pool_seen[gs.pool]) free += gs.pool_free_blocks, pool_seen[gs.pool] = 1;
    if (&now != &last) {
      const kvc_group_stats_t& gw = last.groups[g];
#define X(f) \
  if (gs.f < gw.f) finding("group %u stats." #f " went down", g);
      X(reused_blocks) X(missed_blocks) X(evicted_blocks) X(released_blocks)
#undef X
    }
  }
  if (in_use != s.in_use_blocks || cached != s.cached_blocks || (static_pools && free != s.free_blocks))
    finding("group stats add up to %llu in use, %llu cached, %llu free; the cache says %llu, "
            "%llu, %llu", (unsigned long long)in_use, (unsigned long long)cached,
            (unsigned long long)free, (unsigned long long)s.in_use_blocks,
            (unsigned long long)s.cached_blocks, (unsigned long long)s.free_blocks);

  // Sequences as the shadow says; a block at one place only.
  std::fill(where_.begin(), where_.end(), 0);
  std::vector<uint64_t>& held = held_;
  held.assign(num_groups, 0);
  size_t i = 0;
  for (const auto& [id, m] : seqs) {
    const SeqState& st = now.seqs[i++].second;
    const kvc_sequence_desc_t& d = st.desc;
    if (d.num_tokens != m.length() || d.prompt_tokens != m.prompt_len ||
        d.cached_tokens != m.cached || d.committed_tokens != m.committed ||
        d.prompt_priority != m.prompt_priority || d.decode_priority != m.decode_priority ||
        d.num_blocks != blocks_for(m.length()) || d.reserved != 0)
      finding("sequence %llu: described length %llu prompt %llu cached %llu committed %llu "
              "priorities %u/%u blocks %llu; the shadow: %llu %llu %llu %llu %u/%u %llu",
              (unsigned long long)id, (unsigned long long)d.num_tokens,
              (unsigned long long)d.prompt_tokens, (unsigned long long)d.cached_tokens,
              (unsigned long long)d.committed_tokens, d.prompt_priority, d.decode_priority,
              (unsigned long long)d.num_blocks, (unsigned long long)m.length(),
              (unsigned long long)m.prompt_len, (unsigned long long)m.cached,
              (unsigned long long)m.committed, m.prompt_priority, m.decode_priority,
              (unsigned long long)blocks_for(m.length()));
    for (uint32_t g = 0; g < num_groups; ++g) {
      const uint64_t pool_blocks = pools[group_pool[g]].num_blocks;
      for (uint64_t b = 0; b < st.ids[g].size(); ++b) {
        const int32_t blk = st.ids[g][b];
        const bool released = b < m.window_begin[g];
        if (released != (blk == -1))
          finding("sequence %llu group %u (window %u) position %llu: block %d; the shadow has "
                  "the blocks before %llu released (committed %llu)", (unsigned long long)id, g,
                  window[g], (unsigned long long)b, blk, (unsigned long long)m.window_begin[g],
                  (unsigned long long)m.committed);
        if (blk == -1) continue;
        if (blk < 0 || uint64_t(blk) >= pool_blocks)
          finding("sequence %llu group %u: block id %d outside the pool's %llu blocks",
                  (unsigned long long)id, g, blk, (unsigned long long)pool_blocks);
        int64_t& at = where_[where_base_[group_pool[g]] + uint32_t(blk)];
        const int64_t here = int64_t(uint64_t(g) << 40 | b) + 1;
        if (at == 0) {
          at = here;
          ++held[g];
        } else if (at != here) {
          finding("block %d of pool %u is at group %llu position %llu and at group %u position "
                  "%llu (sequence %llu)", blk, group_pool[g], (unsigned long long)((at - 1) >> 40),
                  (unsigned long long)((at - 1) & 0xFFFFFFFFFFull), g, (unsigned long long)b,
                  (unsigned long long)id);
        }
      }
    }
  }
  // Exported blocks: in use until released, each at its position only
  // (a sequence may hold it there too).
  for (const ExportModel& e : exports)
    for (uint32_t g = 0; g < num_groups; ++g)
      for (uint64_t b = 0; b < e.num_blocks; ++b) {
        const int32_t blk = e.ids[g][b];
        if (blk < 0 || uint64_t(blk) >= pools[group_pool[g]].num_blocks)
          finding("export of sequence %llu group %u: block id %d outside the pool",
                  (unsigned long long)e.seq_id, g, blk);
        int64_t& at = where_[where_base_[group_pool[g]] + uint32_t(blk)];
        const int64_t here = int64_t(uint64_t(g) << 40 | b) + 1;
        if (at == 0) {
          at = here;
          ++held[g];
        } else if (at != here) {
          finding("exported block %d of pool %u (group %u position %llu of sequence %llu's "
                  "export) is also at group %llu position %llu", blk, group_pool[g], g,
                  (unsigned long long)b, (unsigned long long)e.seq_id,
                  (unsigned long long)((at - 1) >> 40), (unsigned long long)((at - 1) & 0xFFFFFFFFFFull));
        }
      }
  for (uint32_t g = 0; g < num_groups; ++g)
    if (held[g] > now.groups[g].in_use_blocks)
      finding("group %u: sequences hold %llu distinct blocks but %llu are in use", g,
              (unsigned long long)held[g], (unsigned long long)now.groups[g].in_use_blocks);
  verify_content(now);
}

void CacheModel::compare_row(const unsigned char* want, uint64_t pos,
                             const std::vector<std::vector<int32_t>>& ids, const char* whose,
                             uint64_t id, const SeqModel* m) const {
  for (uint32_t l = 0; l < num_layers; ++l) {
    const kvc_layer_view_t& v = views[l];
    const int32_t blk = ids[v.group][pos / T];
    if (blk < 0) continue;
    const unsigned char* at = static_cast<const unsigned char*>(v.base) +
                              uint64_t(blk) * v.block_stride + (pos % T) * v.token_stride;
    size_t c = layer_chunk_[l];
    for (uint32_t kv = 0; kv < kv_factor; ++kv)
      for (uint32_t h = 0; h < v.kv_heads; ++h, ++c)
        if (std::memcmp(at + kv * v.kv_stride + h * v.head_stride, want + chunk_[c],
                        size_t(v.head_dim) * elem_size) != 0)
          finding("K/V bytes: %s %llu position %llu (token %d, committed %llu, cached "
                  "%llu) layer %u kv %u head %u in block %d of group %u hold another "
                  "position's bytes", whose, (unsigned long long)id, (unsigned long long)pos,
                  m ? m->tokens[pos] : -1, (unsigned long long)(m ? m->committed : 0),
                  (unsigned long long)(m ? m->cached : 0), l, kv, h, blk, v.group);
  }
}

void CacheModel::verify_content(const Snapshot& now) const {
  size_t i = 0;
  for (const auto& [id, m] : seqs) {
    const SeqState& st = now.seqs[i++].second;
    for (uint64_t pos = 0; pos < m.length(); ++pos)
      compare_row(m.rows.data() + pos * row_bytes_, pos, st.ids, "sequence", id, &m);
  }
  // An exported block keeps the bytes it had until released.
  for (const ExportModel& e : exports)
    for (uint64_t pos = 0; pos < e.num_blocks * T; ++pos)
      compare_row(e.rows.data() + pos * row_bytes_, pos, e.ids, "the export of sequence", e.seq_id,
                  nullptr);
}

}  // namespace kvc_fuzz
