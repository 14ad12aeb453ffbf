// The disk configuration's view of the write-through writer (KVC_FUZZ_DISK,
// fuzz_disk.cpp): what the C API does not report. Linked against the
// library's static twin (kvcache_internal), it reads the store chain's own
// counters and pauses its writer thread between the program's calls.
//
// Each input picks how its programs treat the writer (disk_mode, from the
// first byte): 0 flushes the tiers before every add, resize and import
// (what an add loads then does not depend on the writer thread's timing);
// 1 never flushes there, so an eviction may meet a block whose write job is
// not finished (deferred, store_chain.h); 2 also pauses the writer after
// every call, so that every job a commit queues is still pending when the
// next call's eviction reaches its block (the chain resumes the writer
// whenever it must wait). Nothing the model checks depends on the mode: a
// disk hit is checked bit for bit as any reuse, an add may find more than
// the probe only in whole blocks, and a flush (an operation of its own)
// must leave no job out.
#pragma once

#include <cstdint>

#include <kvcache/kvcache.h>

#ifndef KVC_FUZZ_DISK
#define KVC_FUZZ_DISK 0
#endif

namespace kvc_fuzz {

struct DiskCounters {
  uint64_t deferrals = 0;    // eviction victims deferred: their write job not finished
  uint64_t write_waits = 0;  // waits for a job (a node leaving the tree, or only deferred victims left)
  uint64_t jobs_out = 0;     // write jobs submitted and not taken back yet
};

#if KVC_FUZZ_DISK
extern bool g_deferred_this_input;  // a store chain deferred a victim during this input's program
DiskCounters disk_counters(kvc_cache_t* cache);
void disk_pause_writer(kvc_cache_t* cache, bool paused);
#endif

}  // namespace kvc_fuzz
