// The program's operations on the whole cache: kvc_cache_reset_reuse,
// kvc_cache_resize, kvc_cache_make_room, kvc_cache_advance_clock, and the drain that ends an
// input (and the disk configuration's drain operation, fuzz_disk.cpp).
#include "fuzz_ops.h"

#include "fuzz_emit.h"

#include <cstdarg>
#include <cstdio>

namespace kvc_fuzz {

void Program::reset_reuse() {
  CacheModel& m = c();
  Expect e;
  e.allow(m.last.stats.in_use_blocks == 0 ? KVC_OK : KVC_ERR_INVALID_STATE);
  // Blocks write jobs hold are in use until the reset takes them back
  // (fuzz_disk.h): what stays in use then is what sequences, pins and
  // exports hold (a pin may hold none).
  if (m.writes_hold_blocks() && m.seqs.empty() && m.exports.empty())
    e = m.pins.empty() ? Expect().allow(KVC_OK) : Expect().allow(KVC_OK).allow(KVC_ERR_INVALID_STATE);
  if (emitting())
    emit_call(m.index, "kvc_cache_reset_reuse(c[" + std::to_string(m.index) + "])", "reset_reuse");
  set_current(m.index, "kvc_cache_reset_reuse");
  const kvc_status_t st =
      m.call("kvc_cache_reset_reuse", e, false, [&] { return kvc_cache_reset_reuse(m.cache); });
  trace("c%d reset_reuse() -> %s\n", m.index, kvc_status_string(st));
  if (st != KVC_OK) return;
  m.settle();
  const kvc_cache_stats_t& s = m.last.stats;
  if (s.cached_blocks != 0 || s.host_cached_blocks != 0 || s.free_blocks != s.num_blocks)
    finding("after kvc_cache_reset_reuse: %llu cached, %llu host cached, %llu of %llu free",
            (unsigned long long)s.cached_blocks, (unsigned long long)s.host_cached_blocks,
            (unsigned long long)s.free_blocks, (unsigned long long)s.num_blocks);
}

// kvc_cache_resize to a quarter .. twice the pools now (or a hostile 0 or
// UINT64_MAX): a shrink over a block in use, a budget below a block of every
// group or above the ceiling are refused and change nothing; a success keeps
// every pool's address, and the checks that follow see every live
// sequence's bytes, and later reuse sees the bytes of the cached blocks it
// moved.
void Program::resize() {
  CacheModel& m = c();
  const uint8_t f = in_.u8();
  uint64_t bytes = m.desc.primary_bytes / 4 * (1 + f % 8);
  if (f >= 0xF8) bytes = (f & 1) ? 0 : UINT64_MAX;
  Expect e;
  e.allow(KVC_OK).allow(KVC_ERR_OUT_OF_BLOCKS).allow(KVC_ERR_INVALID_ARGUMENT);
  if (bytes == 0 || bytes == UINT64_MAX) e = Expect().allow(KVC_ERR_INVALID_ARGUMENT);
  // A resize first waits for the disk writes, even when it is refused (it
  // must change nothing visible then): in disk mode 0 settled first, as
  // add() does.
  if (!m.disk_dir.empty() && m.disk_mode == 0) {
    ++g_count.check_calls;
    if (emitting()) emit_line("kvc_cache_flush_tiers(c[%d]);", m.index);
    if (kvc_cache_flush_tiers(m.cache) != KVC_OK)
      finding("kvc_cache_flush_tiers: %s", kvc_last_error_message());
    m.check_all();
  }
  if (emitting())
    emit_call(m.index, "kvc_cache_resize(c[" + std::to_string(m.index) + "], " + c_u64(bytes) + ")",
              "resize");
  set_current(m.index, "kvc_cache_resize");
  const kvc_status_t st =
      m.call("kvc_cache_resize", e, false, [&] { return kvc_cache_resize(m.cache, bytes); });
  trace("c%d resize(%llu) -> %s\n", m.index, (unsigned long long)bytes, kvc_status_string(st));
  if (st != KVC_OK) return;
  m.relearn_pools();
  m.settle();
}

// kvc_cache_make_room for 0 .. 31 block sets (or UINT64_MAX): always
// accepted; evictions as any call's (the checks that follow see every live
// sequence's bytes, later reuse the bytes of what stayed cached or went to
// the host tier). Short of the sets asked for, nothing cached may be left
// that could go (without block stores, whose pending writes keep victims).
void Program::make_room() {
  CacheModel& m = c();
  const uint8_t f = in_.u8();
  const uint64_t sets = f >= 0xF8 ? UINT64_MAX : f % 32;
  if (emitting())
    emit_call(m.index, "kvc_cache_make_room(c[" + std::to_string(m.index) + "], " + c_u64(sets) +
                           ", NULL, NULL)", "make_room");
  set_current(m.index, "kvc_cache_make_room");
  uint64_t free_sets = 0;
  const kvc_status_t st = m.call("kvc_cache_make_room", Expect().allow(KVC_OK), false, [&] {
    return kvc_cache_make_room(m.cache, sets, nullptr, &free_sets);
  });
  trace("c%d make_room(%llu) -> %s, %llu free\n", m.index, (unsigned long long)sets,
        kvc_status_string(st), (unsigned long long)free_sets);
  if (st != KVC_OK) return;
  m.settle();
  const kvc_cache_stats_t& s = m.last.stats;
  if (free_sets > s.free_blocks)
    finding("kvc_cache_make_room: %llu block sets free, but only %llu blocks",
            (unsigned long long)free_sets, (unsigned long long)s.free_blocks);
  if (free_sets < sets && m.disk_dir.empty() && m.num_groups == 1 && s.cached_blocks != 0)
    finding("kvc_cache_make_room(%llu): %llu sets free with %llu blocks still cached",
            (unsigned long long)sets, (unsigned long long)free_sets,
            (unsigned long long)s.cached_blocks);
}

void Program::advance_clock(uint8_t f) {
  CacheModel& m = c();
  uint64_t ms = f % 40;
  if (f >= 0xF0) ms = (f & 1) ? UINT64_MAX : UINT64_MAX - m.clock_ms + 1;
  Expect e;
  if (!m.manual_clock) e.allow(KVC_ERR_INVALID_STATE);
  if (ms > UINT64_MAX - m.clock_ms) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (e.empty()) e.allow(KVC_OK);
  if (emitting())
    emit_call(m.index, "kvc_cache_advance_clock(c[" + std::to_string(m.index) + "], " + c_u64(ms) + ")", "advance_clock");
  set_current(m.index, "kvc_cache_advance_clock");
  const kvc_status_t st = m.call("kvc_cache_advance_clock", e, false,
                                 [&] { return kvc_cache_advance_clock(m.cache, ms); });
  trace("c%d advance_clock(%llu) -> %s\n", m.index, (unsigned long long)ms, kvc_status_string(st));
  if (st != KVC_OK) return;
  m.clock_ms += ms;
  m.settle();
}

void Program::drain(CacheModel& m, const ExportModel* orphan) {
  set_current(m.index, "the drain at the end of the input");
  while (!m.seqs.empty()) {
    const uint64_t id = m.seqs.begin()->first;
    ++g_count.check_calls;
    if (kvc_sequence_remove(m.cache, id) != KVC_OK)
      finding("remove of live sequence %llu: %s", (unsigned long long)id, kvc_last_error_message());
    m.seqs.erase(id);
  }
  while (!m.pins.empty()) {
    ++g_count.check_calls;
    if (kvc_sequence_unpin(m.cache, *m.pins.begin()) != KVC_OK)
      finding("unpin of a pin: %s", kvc_last_error_message());
    m.pins.erase(m.pins.begin());
  }
  if (!m.disk_dir.empty()) {  // write-through jobs hold blocks until they are done
    ++g_count.check_calls;
    if (kvc_cache_flush_tiers(m.cache) != KVC_OK)
      finding("kvc_cache_flush_tiers: %s", kvc_last_error_message());
  }
  m.check_all();
  if (orphan != nullptr) {
    // Its blocks stay in use (the export holds them): a reset is refused.
    uint64_t held = 0;
    for (const auto& ids : orphan->ids) held += ids.size();
    if (m.last.stats.in_use_blocks != held)
      finding("%llu blocks in use with no sequence and no pin; the open export holds %llu",
              (unsigned long long)m.last.stats.in_use_blocks, (unsigned long long)held);
    ++g_count.check_calls;
    if (kvc_cache_reset_reuse(m.cache) != KVC_ERR_INVALID_STATE)
      finding("kvc_cache_reset_reuse with an export open did not return KVC_ERR_INVALID_STATE");
    m.check_all();
    return;
  }
  if (m.last.stats.in_use_blocks != 0)
    finding("%llu blocks in use with no sequence and no pin",
            (unsigned long long)m.last.stats.in_use_blocks);
  ++g_count.check_calls;
  if (kvc_cache_reset_reuse(m.cache) != KVC_OK)
    finding("kvc_cache_reset_reuse with nothing in use: %s", kvc_last_error_message());
  m.check_all();
  const kvc_cache_stats_t& s = m.last.stats;
  if (s.free_blocks != s.num_blocks || s.host_free_blocks != s.host_blocks)
    finding("after the drain and a reset: %llu of %llu blocks free, %llu of %llu host blocks",
            (unsigned long long)s.free_blocks, (unsigned long long)s.num_blocks,
            (unsigned long long)s.host_free_blocks, (unsigned long long)s.host_blocks);
}

}  // namespace kvc_fuzz
