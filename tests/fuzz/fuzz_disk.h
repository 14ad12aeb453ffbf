// The disk configuration's view of the write-through writer (KVC_FUZZ_DISK,
// fuzz_disk.cpp): what the C API does not report. Linked against the
// library's static twin (kvcache_internal), it asks the store chain whether
// write jobs hold blocks and pauses its writer thread between the
// program's calls.
//
// Write-through holds a reference on each block a write job copies out
// until the core takes the finished job back (store_chain.h): such blocks
// are in use, and an add, extend or reset short of them waits for the
// writer. Each input picks how its programs treat the writer (disk_mode,
// from the first byte): 0 flushes the tiers before every add, resize and
// import (what an add loads then does not depend on the writer thread's
// timing, and no write holds a block there); 1 never flushes there, so a
// call may meet blocks held by jobs that are done or still pending; 2 also
// pauses the writer after every call, so that every job a commit queues is
// still pending at the next call (the chain resumes the writer whenever it
// settles: an add or extend short of blocks, a reset, a resize, a flush); 3
// takes a device cache's path instead of write-through: offload at
// eviction, copied out through staging slots and sealed by the offer
// worker, whose slots may still be out at the next call.
// What the model checks does not depend on the mode: a disk hit is checked
// bit for bit as any reuse, an add may find more than the probe only in
// whole blocks, a refused call may only give write-held blocks back (in use
// -> cached, CacheModel::unchanged), and a flush (an operation of its own)
// must leave no write holding a block and nothing queued.
#pragma once

#include <cstdint>

#include <kvcache/kvcache.h>

#ifndef KVC_FUZZ_DISK
#define KVC_FUZZ_DISK 0
#endif

namespace kvc_fuzz {

// The store chain's own counters (store_chain.h): what the C API does not
// report.
struct DiskCounters {
  uint64_t deferrals = 0;    // eviction victims deferred: their write job not finished
  uint64_t write_waits = 0;  // waits for a job (a node leaving the tree, or only deferred victims left)
  uint64_t jobs_out = 0;     // write jobs submitted and not taken back yet
};

#if KVC_FUZZ_DISK
extern bool g_deferred_this_input;  // a store chain deferred a victim during this input's program
DiskCounters disk_counters(kvc_cache_t* cache);
// Whether write-through jobs hold blocks of the cache now (false without a
// store chain).
bool disk_writes_pending(kvc_cache_t* cache);
void disk_pause_writer(kvc_cache_t* cache, bool paused);
// Disk mode 3: the cache offloads at eviction through pinned staging and
// the offer worker, as a device cache does (StoreChain::set_write_through
// and set_direct_access off).
void disk_offload_at_eviction(kvc_cache_t* cache);
#endif

}  // namespace kvc_fuzz
