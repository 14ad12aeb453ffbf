// fuzz_disk.h: the store chain's counters and writer pause, reached through
// the handle (the disk configuration links the library's static twin).
#include "fuzz_disk.h"

#include "capi/handles.h"
#include "core/block_manager.h"
#include "core/store_chain.h"

namespace kvc_fuzz {

bool g_deferred_this_input = false;

namespace {
kvc::StoreChain* chain(kvc_cache_t* cache) { return cache->impl->manager().stores(); }
}  // namespace

DiskCounters disk_counters(kvc_cache_t* cache) {
  DiskCounters d;
  if (const kvc::StoreChain* s = chain(cache)) {
    d.deferrals = s->deferrals();
    d.write_waits = s->write_waits();
    d.jobs_out = s->jobs_out();
  }
  return d;
}

void disk_pause_writer(kvc_cache_t* cache, bool paused) {
  if (kvc::StoreChain* s = chain(cache)) s->pause_writer(paused);
}

}  // namespace kvc_fuzz
