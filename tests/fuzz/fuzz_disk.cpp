// fuzz_disk.h: the store chain's pending writes and writer pause, reached
// through the handle (the disk configuration links the library's static
// twin), and the disk configuration's operations (flush, drain and reload,
// the writer paused again after every call).
#include "fuzz_disk.h"

#include <cstdarg>
#include <cstdio>

#include "fuzz_emit.h"
#include "fuzz_feedback.h"
#include "fuzz_ops.h"

#include "capi/handles.h"
#include "core/block_manager.h"
#include "core/store_chain.h"

namespace kvc_fuzz {

namespace {
kvc::StoreChain* chain(kvc_cache_t* cache) { return cache->impl->manager().stores(); }
}  // namespace

bool g_deferred_this_input = false;

DiskCounters disk_counters(kvc_cache_t* cache) {
  DiskCounters d;
  if (const kvc::StoreChain* s = chain(cache)) {
    d.deferrals = s->deferrals();
    d.write_waits = s->write_waits();
    d.jobs_out = s->jobs_out();
  }
  return d;
}

bool disk_writes_pending(kvc_cache_t* cache) {
  const kvc::StoreChain* s = chain(cache);
  return s != nullptr && s->writes_pending();
}

void disk_pause_writer(kvc_cache_t* cache, bool paused) {
  if (kvc::StoreChain* s = chain(cache)) s->pause_writer(paused);
}

void disk_offload_at_eviction(kvc_cache_t* cache) {
  if (kvc::StoreChain* s = chain(cache)) {
    s->set_write_through(false);
    s->set_direct_access(false);
  }
}

// After each call: whether write jobs hold blocks now feeds the fuzzer per
// mode and operation (an input whose later calls meet write-held blocks is
// kept), and in disk mode 2 the writer is paused again (a settle resumes
// it), so that the next commit's jobs stay pending (fuzz_disk.h).
void Program::after_call_disk() {
  for (auto& owner : caches_) {
    for (CacheModel* m : {owner.get(), owner->twin.get()}) {
      if (m == nullptr || m->disk_dir.empty()) continue;
      if (disk_writes_pending(m->cache)) {
        ++g_count.disk_pending_calls;
        feedback(kTierMoves, 37 + uint32_t(m->disk_mode), g_op);
      }
      // Deferred victims and waits for the writer (write jobs that an
      // eviction or a leaving node met unfinished) feed the fuzzer too.
      const DiskCounters d = disk_counters(m->cache);
      if (d.deferrals != m->disk_seen_deferrals || d.write_waits != m->disk_seen_waits) {
        feedback(kTierMoves, 40 + uint32_t(m->disk_mode), bucket(d.deferrals - m->disk_seen_deferrals));
        feedback(kTierMoves, 43 + uint32_t(m->disk_mode), bucket(d.write_waits - m->disk_seen_waits));
        if (d.deferrals != m->disk_seen_deferrals) g_deferred_this_input = true;
        m->disk_seen_deferrals = d.deferrals;
        m->disk_seen_waits = d.write_waits;
      }
      if (m->disk_mode == 2) disk_pause_writer(m->cache, true);
    }
  }
}

// The drain operation: every sequence and pin removed, the writes flushed,
// the tree reset (the end-of-input drain), then an add of the committed
// tokens of the live sequence that had the most, with its options, and one
// more token: its full blocks (those the disk kept) come back from the disk
// only, checked bit for bit as any reuse.
void Program::drain_and_reload() {
  CacheModel& m = c();
  ++g_count.disk_drains;
  const SeqModel* best = nullptr;
  for (const auto& [id, s] : m.seqs)
    if (best == nullptr || s.committed > best->committed) best = &s;
  std::vector<int32_t> again;
  std::shared_ptr<const Options> opts;
  if (best != nullptr && best->committed > 0) {
    again.assign(best->tokens.begin(), best->tokens.begin() + long(best->committed));
    opts = best->opts;
  }
  drain(m);
  trace("c%d drain (every sequence removed, tiers flushed, tree reset)\n", m.index);
  if (again.empty()) return;
  again.push_back(small_token());
  forced_prompt_ = std::move(again);
  forced_opts_ = std::move(opts);
  add(false);
  forced_prompt_.clear();  // an add that did not reach prompt()
  forced_opts_.reset();
}

// kvc_cache_flush_tiers: every write queued before it is done and taken
// back (no block held by a write job, nothing queued), and nothing the
// snapshot shows changed but what the shadow says (write-held blocks
// cached again).
void Program::flush_tiers() {
  CacheModel& m = c();
  ++g_count.disk_flushes;
  if (emitting())
    emit_call(m.index, "kvc_cache_flush_tiers(c[" + std::to_string(m.index) + "])", "flush_tiers");
  set_current(m.index, "kvc_cache_flush_tiers");
  Expect ok;
  ok.allow(KVC_OK);
  m.call("kvc_cache_flush_tiers", ok, false, [&] { return kvc_cache_flush_tiers(m.cache); });
  trace("c%d flush_tiers() -> KVC_OK\n", m.index);
  if (disk_writes_pending(m.cache)) finding("kvc_cache_flush_tiers left write jobs holding blocks");
  kvc_tier_stats_t t;
  kvc_tier_stats_init(&t);
  ++g_count.check_calls;
  if (kvc_cache_get_tier_stats(m.cache, KVC_TIER_DISK, &t) != KVC_OK)
    finding("kvc_cache_get_tier_stats of the disk tier: %s", kvc_last_error_message());
  if (t.queued_blocks != 0)
    finding("kvc_cache_flush_tiers left %llu writes queued", (unsigned long long)t.queued_blocks);
  const DiskCounters d = disk_counters(m.cache);
  if (d.jobs_out != 0)
    finding("kvc_cache_flush_tiers left %llu write jobs out", (unsigned long long)d.jobs_out);
  m.settle();
}

}  // namespace kvc_fuzz
