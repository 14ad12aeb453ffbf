// The program's operations that only read (or must refuse): probes, blocks
// needed, batch tables, statistics and descriptions with hostile buffers,
// and kernel calls whose arguments are out of range.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "fuzz_emit.h"
#include "fuzz_ops.h"

namespace kvc_fuzz {

namespace {


constexpr unsigned char kSentinel = 0xCD;

// A transparent output struct handed over with a hostile struct_size: the
// library must refuse sizes under 4, else write exactly min(size, its own
// size) bytes of `want` (struct_size as given) and zero a longer tail.
template <class T, class Get>
void sized_out(CacheModel& m, const char* what, const T& want, uint8_t f, Expect errors, Get get) {
  std::vector<unsigned char> buf(sizeof(T) + 16, kSentinel);
  size_t size = sizeof(T);
  bool null_out = false;
  switch (f % 8) {
    case 7: null_out = true; break;
    case 6: size = 0; break;
    case 5: size = 3; break;
    case 4: size = 8; break;
    case 3: size = sizeof(T) - 8; break;
    case 2: size = sizeof(T) + 8; break;
    default: break;
  }
  const uint32_t s32 = uint32_t(size);
  std::memcpy(buf.data(), &s32, 4);
  if (null_out || size < 4) errors.allow(KVC_ERR_INVALID_ARGUMENT);
  if (errors.empty()) errors.allow(KVC_OK);
  if (emitting()) emit_line("/* %s with a hostile buffer (checked by the harness) */", what);
  set_current(m.index, what);
  const kvc_status_t st = m.call(what, errors, true, [&] {
    return get(null_out ? nullptr : reinterpret_cast<T*>(buf.data()));
  });
  T w = want;
  w.struct_size = s32;
  const unsigned char* wb = reinterpret_cast<const unsigned char*>(&w);
  for (size_t i = 0; i < buf.size(); ++i) {
    unsigned char expect = kSentinel;
    if (i < 4) expect = reinterpret_cast<const unsigned char*>(&s32)[i];
    else if (st == KVC_OK && i < std::min(size, sizeof(T))) expect = wb[i];
    else if (st == KVC_OK && i >= sizeof(T) && i < size) expect = 0;
    if (buf[i] != expect)
      finding("%s with struct_size %zu returned %s; byte %zu is 0x%02x, expected 0x%02x", what,
              size, kvc_status_string(st), i, buf[i], expect);
  }
}

}  // namespace

void Program::probe() {
  CacheModel& m = c();
  std::vector<int32_t> tokens = prompt();
  const auto opts = Options::decode(in_);
  const uint8_t f = in_.u8();
  const int32_t* tp = tokens.data();
  uint64_t n = tokens.size();
  bool null_out = false;
  switch (f % 8) {
    case 7: tp = nullptr; break;
    case 6: n = 0; break;
    case 5: n = (f & 0x80) ? UINT64_MAX : kMaxTokens + 1; break;
    case 4: null_out = true; break;
    default: break;
  }
  Expect e;
  if ((tp == nullptr && n > 0) || n == 0 || n > kMaxTokens || null_out || opts->invalid ||
      opts->unchecked_precondition)
    e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (!((tp == nullptr && n > 0) || n == 0 || n > kMaxTokens || null_out || opts->invalid))
    e.allow(KVC_OK);
  uint64_t p = UINT64_MAX;
  if (emitting()) emit_line("/* kvc_cache_probe (checked by the harness) */");
  set_current(m.index, "kvc_cache_probe");
  const kvc_status_t st = m.call("kvc_cache_probe", e, true, [&] {
    return kvc_cache_probe(m.cache, tp, n, opts->ptr(), null_out ? nullptr : &p);
  });
  if (st == KVC_OK && (p >= n || (!m.block_reuse && p != 0)))
    finding("probe of %llu tokens found %llu cached", (unsigned long long)n, (unsigned long long)p);
}

void Program::blocks_needed() {
  CacheModel& m = c();
  const uint64_t id = live_id();
  const uint8_t f = in_.u8();
  const SeqModel* s = find(id);
  const uint64_t len = s ? s->length() : 0;
  uint64_t n = f % 10;
  bool null_out = false;
  switch ((f >> 4) % 8) {
    case 7: n = hostile_count(in_, len); break;
    case 6: n = kMaxTokens - len; break;  // the longest allowed
    case 5: null_out = true; break;
    default: break;
  }
  Expect e;
  if (null_out) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (s == nullptr) e.allow(KVC_ERR_NOT_FOUND);
  if (e.empty()) e.allow(n != 0 && n > kMaxTokens - len ? KVC_ERR_INVALID_ARGUMENT : KVC_OK);
  uint64_t need = UINT64_MAX;
  if (emitting())
    emit_call(m.index, "kvc_sequence_blocks_needed(c[" + std::to_string(m.index) + "], " + c_u64(id) +
              ", " + c_u64(n) + (null_out ? ", NULL)" : ", &u64)"), "blocks_needed " + std::to_string(id));
  set_current(m.index, "kvc_sequence_blocks_needed");
  const kvc_status_t st = m.call("kvc_sequence_blocks_needed", e, true, [&] {
    return kvc_sequence_blocks_needed(m.cache, id, n, null_out ? nullptr : &need);
  });
  if (st != KVC_OK) return;
  // The new blocks, plus one if the tail is shared and must be copied.
  const uint64_t base = n == 0 ? 0 : m.blocks_for(len + n) - m.blocks_for(len);
  const bool may_copy = n != 0 && len % m.T != 0;
  if (need != base && !(may_copy && need == base + 1))
    finding("blocks_needed(%llu tokens) on a sequence of %llu: %llu, expected %llu%s",
            (unsigned long long)n, (unsigned long long)len, (unsigned long long)need,
            (unsigned long long)base, may_copy ? " (+1 for a shared tail)" : "");
}

// The ids and group of a table call; -1 marks released blocks.
void Program::block_table() {
  CacheModel& m = c();
  bool unknown, repeated;
  const std::vector<uint64_t> ids = batch_ids(&unknown, &repeated);
  const uint8_t f = in_.u8(), g8 = in_.u8();
  const uint32_t group = g8 < 0xF0 ? g8 % m.num_groups : (g8 & 1 ? m.num_groups : UINT32_MAX);
  const size_t count = ids.size();
  size_t needed = 0;
  for (uint64_t id : ids)
    if (find(id)) needed = std::max<size_t>(needed, m.blocks_for(find(id)->length()));
  size_t max_blocks = needed;
  switch (f % 6) {
    case 1: max_blocks = needed > 0 ? needed - 1 : 0; break;
    case 2: max_blocks = 0; break;
    case 3: max_blocks = needed + 2; break;
    default: break;
  }
  static const int32_t kPads[4] = {-1, 0, 77, INT32_MIN};
  const int32_t pad = kPads[(f >> 3) & 3];
  std::vector<int32_t> table(count * max_blocks + 1, -9);
  size_t got = 12345;
  const uint64_t* ip = (f & 0x80) && count > 0 ? nullptr : ids.data();
  int32_t* tp = (f & 0x40) && (f & 0x20) ? nullptr : table.data();
  const bool want_needed = !(f & 0x20) || (f & 0x40);
  Expect e;
  const bool invalid =
      (ip == nullptr && count > 0) || (tp == nullptr && count > 0 && max_blocks > 0) ||
      group >= m.num_groups;
  if (invalid) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (unknown) e.allow(KVC_ERR_NOT_FOUND);
  if (repeated) e.allow(KVC_ERR_INVALID_ARGUMENT);  // a repeated id: not documented either way
  if (!invalid && !unknown) e.allow(needed > max_blocks ? KVC_ERR_BUFFER_TOO_SMALL : KVC_OK);
  if (emitting()) emit_line("/* kvc_batch_block_table (checked by the harness) */");
  set_current(m.index, "kvc_batch_block_table");
  const kvc_status_t st = m.call("kvc_batch_block_table", e, true, [&] {
    return kvc_batch_block_table(m.cache, group, ip, count, tp, max_blocks, pad,
                                 want_needed ? &got : nullptr);
  });
  if (want_needed && got != (st == KVC_OK || st == KVC_ERR_BUFFER_TOO_SMALL ? needed : 12345))
    finding("block table: blocks_needed %zu after %s, expected %zu", got, kvc_status_string(st), needed);
  for (size_t i = 0; i < table.size(); ++i) {
    int32_t want = -9;
    if (st == KVC_OK && i < count * max_blocks) {
      const std::vector<int32_t>& row = m.last.seq(ids[i / max_blocks]).ids[group];
      const size_t b = i % max_blocks;
      want = b < row.size() && row[b] != -1 ? row[b] : pad;
    }
    if (table[i] != want)
      finding("block table entry %zu (max_blocks %zu) is %d after %s, expected %d", i, max_blocks,
              table[i], kvc_status_string(st), want);
  }
}

void Program::block_table_csr() {
  CacheModel& m = c();
  bool unknown, repeated;
  const std::vector<uint64_t> ids = batch_ids(&unknown, &repeated);
  const uint8_t f = in_.u8(), g8 = in_.u8();
  const uint32_t group = g8 < 0xF0 ? g8 % m.num_groups : m.num_groups + (g8 & 3);
  const size_t count = ids.size();
  size_t total = 0;
  for (uint64_t id : ids)
    if (find(id)) total += m.blocks_for(find(id)->length());
  size_t cap = total;
  switch (f % 6) {
    case 1: cap = total > 0 ? total - 1 : 0; break;
    case 2: cap = 0; break;
    case 3: cap = total + 3; break;
    default: break;
  }
  std::vector<int32_t> indptr(count + 2, -9), indices(cap + 1, -9), last(count + 1, -9);
  size_t got = 12345;
  int32_t* pp = (f >> 3) % 8 == 1 ? nullptr : indptr.data();
  int32_t* xp = (f >> 3) % 8 == 2 && cap > 0 ? nullptr : indices.data();
  int32_t* lp = (f >> 3) % 8 == 3 && count > 0 ? nullptr : last.data();
  const uint64_t* ip = (f >> 3) % 8 == 4 && count > 0 ? nullptr : ids.data();
  const bool want_num = !(f & 0x40);
  Expect e;
  const bool invalid =
      pp == nullptr || (xp == nullptr && cap > 0) || (lp == nullptr && count > 0) ||
      (ip == nullptr && count > 0) || group >= m.num_groups;
  if (invalid) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (unknown) e.allow(KVC_ERR_NOT_FOUND);
  if (repeated) e.allow(KVC_ERR_INVALID_ARGUMENT);  // a repeated id: not documented either way
  if (!invalid && !unknown) e.allow(total > cap ? KVC_ERR_BUFFER_TOO_SMALL : KVC_OK);
  if (emitting()) emit_line("/* kvc_batch_block_table_csr (checked by the harness) */");
  set_current(m.index, "kvc_batch_block_table_csr");
  const kvc_status_t st = m.call("kvc_batch_block_table_csr", e, true, [&] {
    return kvc_batch_block_table_csr(m.cache, group, ip, count, pp, xp, cap, lp,
                                     want_num ? &got : nullptr);
  });
  if (want_num && got != (st == KVC_OK || st == KVC_ERR_BUFFER_TOO_SMALL ? total : 12345))
    finding("csr: num_indices %zu after %s, expected %zu", got, kvc_status_string(st), total);
  std::vector<int32_t> wp(indptr.size(), -9), wx(indices.size(), -9), wl(last.size(), -9);
  if (st == KVC_OK) {
    size_t at = 0;
    wp[0] = 0;
    for (size_t i = 0; i < count; ++i) {
      for (int32_t b : m.last.seq(ids[i]).ids[group]) wx[at++] = b == -1 ? 0 : b;
      wp[i + 1] = int32_t(at);
      const uint64_t len = find(ids[i])->length();
      wl[i] = len == 0 ? 0 : int32_t((len - 1) % m.T + 1);
    }
  }
  if (indptr != wp || indices != wx || last != wl)
    finding("csr tables differ from the block ids after %s (count %zu, capacity %zu)",
            kvc_status_string(st), count, cap);
}

void Program::lengths() {
  CacheModel& m = c();
  bool unknown, repeated;
  const std::vector<uint64_t> ids = batch_ids(&unknown, &repeated);
  const uint8_t f = in_.u8();
  std::vector<int32_t> out(ids.size() + 1, -9);
  const size_t count = ids.size();
  const uint64_t* ip = f % 8 == 7 && count > 0 ? nullptr : ids.data();
  int32_t* op = f % 8 == 6 && count > 0 ? nullptr : out.data();
  Expect e;
  const bool invalid = count > 0 && (ip == nullptr || op == nullptr);
  if (invalid) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (unknown) e.allow(KVC_ERR_NOT_FOUND);
  if (repeated) e.allow(KVC_ERR_INVALID_ARGUMENT);  // a repeated id: not documented either way
  if (!invalid && !unknown) e.allow(KVC_OK);
  if (emitting()) emit_line("/* kvc_batch_sequence_lengths (checked by the harness) */");
  set_current(m.index, "kvc_batch_sequence_lengths");
  const kvc_status_t st = m.call("kvc_batch_sequence_lengths", e, true, [&] {
    return kvc_batch_sequence_lengths(m.cache, ip, count, op);
  });
  for (size_t i = 0; i < out.size(); ++i) {
    const int32_t want = st == KVC_OK && i < count ? int32_t(find(ids[i])->length()) : -9;
    if (out[i] != want) finding("lengths[%zu] = %d after %s, expected %d", i, out[i], kvc_status_string(st), want);
  }
}

// Every sequence's new tokens were mapped when they came: none is pending.
void Program::slot_mapping() {
  CacheModel& m = c();
  bool unknown, repeated;
  const std::vector<uint64_t> ids = batch_ids(&unknown, &repeated);
  const uint8_t f = in_.u8(), g8 = in_.u8();
  const uint32_t group = g8 < 0xF0 ? g8 % m.num_groups : m.num_groups;
  const size_t count = ids.size();
  std::vector<int64_t> slots(4, -9);
  std::vector<int32_t> added(count + 1, -9);
  size_t got = 12345;
  const size_t cap = f % 4;
  int64_t* sp = f % 16 == 3 ? nullptr : slots.data();
  const uint64_t* ip = f % 16 == 5 && count > 0 ? nullptr : ids.data();
  int32_t* ap = (f & 0x10) ? nullptr : added.data();
  Expect e;
  if ((ip == nullptr && count > 0) || (sp == nullptr && cap > 0) || group >= m.num_groups)
    e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (unknown) e.allow(KVC_ERR_NOT_FOUND);
  if (repeated) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (e.empty()) e.allow(KVC_OK);
  if (emitting()) emit_line("/* kvc_batch_slot_mapping (checked by the harness) */");
  set_current(m.index, "kvc_batch_slot_mapping");
  const kvc_status_t st = m.call("kvc_batch_slot_mapping", e, true, [&] {
    return kvc_batch_slot_mapping(m.cache, group, ip, count, sp, cap, (f & 0x20) ? nullptr : &got, ap);
  });
  if (!(f & 0x20) && got != (st == KVC_OK ? 0 : 12345))
    finding("slot mapping: num_slots %zu after %s, nothing pending", got, kvc_status_string(st));
  for (size_t i = 0; i < added.size(); ++i)
    if (added[i] != (st == KVC_OK && ap && i < count ? 0 : -9))
      finding("slot mapping: new_tokens[%zu] = %d after %s", i, added[i], kvc_status_string(st));
  for (int64_t s : slots)
    if (s != -9) finding("slot mapping wrote a slot with nothing pending");
}

void Program::stats() {
  CacheModel& m = c();
  const uint8_t f = in_.u8(), g8 = in_.u8();
  if ((f >> 3) & 1) {
    const uint32_t group = g8 < 0xF0 ? g8 % m.num_groups : m.num_groups + (g8 & 7);
    Expect e;
    if (group >= m.num_groups) e.allow(KVC_ERR_INVALID_ARGUMENT);
    const kvc_group_stats_t want = group < m.num_groups ? m.last.groups[group] : kvc_group_stats_t{};
    sized_out<kvc_group_stats_t>(m, "kvc_cache_get_group_stats", want, f, e, [&](kvc_group_stats_t* o) {
      return kvc_cache_get_group_stats(m.cache, group, o);
    });
  } else {
    sized_out<kvc_cache_stats_t>(m, "kvc_cache_get_stats", m.last.stats, f, Expect(),
                                 [&](kvc_cache_stats_t* o) { return kvc_cache_get_stats(m.cache, o); });
  }
  if ((f >> 4) == 0xF) {  // NULL handles
    set_current(m.index, "NULL cache handles");
    Expect e;
    e.allow(KVC_ERR_INVALID_ARGUMENT);
    kvc_cache_stats_t s = KVC_CACHE_STATS_INIT;
    m.call("kvc_cache_get_stats(NULL)", e, true, [&] { return kvc_cache_get_stats(nullptr, &s); });
    m.call("kvc_cache_check(NULL)", e, true, [&] { return kvc_cache_check(nullptr); });
    m.call("kvc_sequence_remove(NULL)", e, true, [&] { return kvc_sequence_remove(nullptr, 0); });
    m.call("kvc_cache_reset_reuse(NULL)", e, true, [&] { return kvc_cache_reset_reuse(nullptr); });
  }
}

void Program::describe_sequence() {
  CacheModel& m = c();
  const uint64_t id = live_id();
  const uint8_t f = in_.u8();
  Expect e;
  if (find(id) == nullptr) e.allow(KVC_ERR_NOT_FOUND);
  const kvc_sequence_desc_t want = find(id) ? m.last.seq(id).desc : kvc_sequence_desc_t{};
  sized_out<kvc_sequence_desc_t>(m, "kvc_sequence_describe", want, f, e, [&](kvc_sequence_desc_t* o) {
    return kvc_sequence_describe(m.cache, id, o);
  });
}

void Program::block_ids() {
  CacheModel& m = c();
  const uint64_t id = live_id();
  const uint8_t f = in_.u8(), g8 = in_.u8();
  uint32_t group = g8 % m.num_groups;
  const SeqModel* s = find(id);
  const size_t nb = s ? m.blocks_for(s->length()) : 0;
  size_t cap = nb + 2;
  std::vector<int32_t> ids(nb + 3, -9);
  int32_t* ip = ids.data();
  size_t count = 12345;
  bool null_count = false;
  switch (f % 6) {
    case 5: cap = nb > 0 ? nb - 1 : 0; break;
    case 4: ip = nullptr, cap = 3; break;
    case 3: null_count = true; break;
    case 2: group = (f & 0x80) ? UINT32_MAX : m.num_groups; break;
    case 1: ip = nullptr, cap = 0; break;
    default: break;
  }
  Expect e;
  if ((ip == nullptr && cap > 0) || null_count || group >= m.num_groups)
    e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (s == nullptr) e.allow(KVC_ERR_NOT_FOUND);
  if (e.empty()) e.allow(nb > cap ? KVC_ERR_BUFFER_TOO_SMALL : KVC_OK);
  if (emitting()) emit_line("/* kvc_sequence_block_ids (checked by the harness) */");
  set_current(m.index, "kvc_sequence_block_ids");
  const kvc_status_t st = m.call("kvc_sequence_block_ids", e, true, [&] {
    return kvc_sequence_block_ids(m.cache, id, group, ip, cap, null_count ? nullptr : &count);
  });
  if (!null_count && count != (st == KVC_OK || st == KVC_ERR_BUFFER_TOO_SMALL ? nb : 12345))
    finding("block_ids: count %zu after %s, expected %zu", count, kvc_status_string(st), nb);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t want = st == KVC_OK && i < nb ? m.last.seq(id).ids[group][i] : -9;
    if (ids[i] != want) finding("block_ids[%zu] = %d after %s, expected %d", i, ids[i], kvc_status_string(st), want);
  }
}

void Program::describe_cache() {
  CacheModel& m = c();
  const uint8_t f = in_.u8(), i8 = in_.u8();
  const uint32_t k = i8 < 0xF0 ? i8 : UINT32_MAX - (i8 & 3);
  switch ((f >> 3) % 4) {
    case 0:
      sized_out<kvc_cache_desc_t>(m, "kvc_cache_describe", m.desc, f, Expect(),
                                  [&](kvc_cache_desc_t* o) { return kvc_cache_describe(m.cache, o); });
      break;
    case 1: {
      Expect e;
      if (k >= m.num_layers) e.allow(KVC_ERR_INVALID_ARGUMENT);
      const kvc_layer_view_t want = k < m.num_layers ? m.views[k] : kvc_layer_view_t{};
      sized_out<kvc_layer_view_t>(m, "kvc_cache_layer_view", want, f, e, [&](kvc_layer_view_t* o) {
        return kvc_cache_layer_view(m.cache, k, o);
      });
      break;
    }
    case 2: {
      Expect e;
      if (k >= m.num_pools) e.allow(KVC_ERR_INVALID_ARGUMENT);
      const kvc_pool_desc_t want = k < m.num_pools ? m.pools[k] : kvc_pool_desc_t{};
      sized_out<kvc_pool_desc_t>(m, "kvc_cache_describe_pool", want, f, e, [&](kvc_pool_desc_t* o) {
        return kvc_cache_describe_pool(m.cache, k, o);
      });
      break;
    }
    default: {
      Expect e;
      if (k >= m.num_groups) e.allow(KVC_ERR_INVALID_ARGUMENT);
      kvc_group_desc_t want{};
      if (k < m.num_groups) {
        kvc_group_desc_init(&want);
        ++g_count.check_calls;
        if (kvc_cache_describe_group(m.cache, k, &want) != KVC_OK) finding("describe_group %u", k);
        if (want.window != m.window[k] || want.pool != m.group_pool[k]) finding("group %u changed", k);
      }
      sized_out<kvc_group_desc_t>(m, "kvc_cache_describe_group", want, f, e, [&](kvc_group_desc_t* o) {
        return kvc_cache_describe_group(m.cache, k, o);
      });
      break;
    }
  }
}

// Kernel calls with an argument out of range: refused before anything is
// written (a CPU cache checks slots and block ids on the host).
void Program::kernels() {
  CacheModel& m = c();
  const uint8_t f = in_.u8(), g = in_.u8();
  const kvc_layer_view_t& v = m.views[g % m.num_layers];
  const int64_t slots_total = int64_t(v.num_blocks) * m.T;
  if (f & 1) {
    std::vector<unsigned char> key(2 * v.kv_heads * v.head_dim * m.elem_size, 0x11);
    std::vector<unsigned char> value = key;
    int64_t slots[2] = {int64_t(g) % slots_total, -1};
    kvc_store_args_t a;
    kvc_store_args_init(&a);
    a.layer = g % m.num_layers;
    a.num_tokens = 2;
    a.src_dtype = m.dtype;
    a.key = key.data();
    a.value = m.kv_factor == 2 ? value.data() : nullptr;
    a.slot_mapping = slots;
    switch ((f >> 1) % 8) {
      case 0: slots[1] = slots_total; break;
      case 1: slots[1] = -2; break;
      case 2: slots[0] = INT64_MAX; break;
      case 3: a.layer = m.num_layers + (g & 3); break;
      case 4: a.src_dtype = m.dtype == KVC_DTYPE_F32 ? KVC_DTYPE_F16 : KVC_DTYPE_F32; break;
      case 5: a.value = m.kv_factor == 2 ? nullptr : value.data(); break;
      case 6: a.key = nullptr; break;
      default: a.slot_mapping = nullptr; break;
    }
    Expect e;
    e.allow(KVC_ERR_INVALID_ARGUMENT);
    if (emitting()) emit_line("/* kvc_store_kv with a bad argument (checked by the harness) */");
  set_current(m.index, "kvc_store_kv with a bad argument");
    m.call("kvc_store_kv", e, true, [&] { return kvc_store_kv(m.cache, &a, nullptr); });
    if (f & 0x20) {
      // The strided store: the same bad arguments with good strides, then
      // good arguments (skipped slots) with bad strides.
      kvc_store_strides_t s;
      kvc_store_strides_init(&s);
      s.key_token_stride = s.value_token_stride = int64_t(v.kv_heads) * v.head_dim;
      s.key_head_stride = s.value_head_stride = v.head_dim;
      set_current(m.index, "kvc_store_kv_strided with a bad argument");
      m.call("kvc_store_kv_strided", e, true, [&] { return kvc_store_kv_strided(m.cache, &a, &s, nullptr); });
      int64_t skip[2] = {-1, -1};
      a.layer = g % m.num_layers;
      a.src_dtype = m.dtype;
      a.key = key.data();
      a.value = m.kv_factor == 2 ? value.data() : nullptr;
      a.slot_mapping = skip;
      a.num_tokens = 2;
      const kvc_store_strides_t* sp = &s;
      switch ((f >> 6) & 3) {
        case 0: sp = nullptr; break;
        case 1: s.struct_size = 0; break;
        default: s.seq_len = 3; break;  // 2 tokens are not sequences of 3
      }
      set_current(m.index, "kvc_store_kv_strided with bad strides");
      m.call("kvc_store_kv_strided", e, true, [&] { return kvc_store_kv_strided(m.cache, &a, sp, nullptr); });
    }
    if (f & 0x80) {  // nothing to write: a no-op
      slots[0] = slots[1] = -1;
      a.layer = g % m.num_layers;
      a.src_dtype = m.dtype;
      a.key = key.data();
      a.value = m.kv_factor == 2 ? value.data() : nullptr;
      a.slot_mapping = (f & 0x40) ? slots : nullptr;
      a.num_tokens = (f & 0x40) ? 2 : 0;
      Expect ok;
      ok.allow(KVC_OK);
      m.call("kvc_store_kv of skipped slots", ok, true, [&] { return kvc_store_kv(m.cache, &a, nullptr); });
    }
    return;
  }
  const uint32_t group = v.group;
  const int32_t nblocks = int32_t(m.pools[m.group_pool[group]].num_blocks);
  int32_t src[2] = {0, int32_t(g) % nblocks}, dst[2] = {1 % nblocks, 1 % nblocks};
  uint32_t count = 2;
  uint32_t grp = group;
  switch ((f >> 1) % 6) {
    case 0: break;  // one destination twice (or a destination that is also a source)
    case 1: src[1] = nblocks; break;
    case 2: dst[0] = -1; break;
    case 3: dst[0] = src[1]; dst[1] = nblocks + 5; break;
    case 4: grp = m.num_groups; count = (f & 0x80) ? 0 : 1; break;
    default: count = 0; break;
  }
  Expect e;
  e.allow(count == 0 && grp < m.num_groups ? KVC_OK : KVC_ERR_INVALID_ARGUMENT);
  if (emitting()) emit_line("/* kvc_copy_blocks with a bad argument (checked by the harness) */");
  set_current(m.index, "kvc_copy_blocks with a bad argument");
  m.call("kvc_copy_blocks", e, true,
         [&] { return kvc_copy_blocks(m.cache, grp, src, dst, nullptr, count, nullptr); });
}

}  // namespace kvc_fuzz
