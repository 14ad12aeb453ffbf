// The harness's model of one cache: what it knows of the configuration, a
// shadow of every sequence (tokens, lengths, the windowed blocks released,
// the K/V bytes every position must hold), snapshots of what the public API
// reports, and the checks between them:
//  - after every call: kvc_cache_check, the stats adding up;
//  - after a successful change: every sequence as the shadow says, block
//    ids in range and never at two places, and every K/V byte of every
//    position of every live sequence as written (reused, onboarded and
//    copied blocks included);
//  - after a failed call or one that only reads: the snapshot unchanged
//    (stats, every sequence and its block ids, every byte of the pools).
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <kvcache/kvcache.h>

#include "fuzz_disk.h"
#include "fuzz_events.h"

#include "fuzz_options.h"

namespace kvc_fuzz {

// Prints what broke (and the call being checked) and aborts: libFuzzer
// keeps the input.
[[noreturn]] void finding(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

struct Counters {
  uint64_t inputs = 0;
  uint64_t calls = 0;        // calls of the fuzzed program (hostile ones included)
  uint64_t check_calls = 0;  // calls the checks make (snapshots, K/V writes)
  uint64_t failed_calls = 0; // failed calls whose snapshot was compared
  uint64_t disk_loads = 0;   // adds that loaded blocks from a disk tier
  uint64_t disk_blocks = 0;  // blocks they loaded (checked bit for bit)
  kvc_tier_stats_t disk{};   // the disk tiers' statistics, summed at destruction
  // The disk configuration (fuzz_disk.h): inputs per disk mode, calls
  // after which write jobs held blocks, refused calls that gave write-held
  // blocks back (in use -> cached), the flush and drain operations.
  uint64_t disk_mode_inputs[4] = {};
  uint64_t disk_pending_calls = 0, disk_released_on_failure = 0, disk_flushes = 0;
  uint64_t disk_drains = 0;  // drain operations (every sequence removed, the tree reset)
  // The store chains' deferred victims and waits for the writer (summed at
  // destruction), and the inputs with at least one deferral.
  uint64_t disk_deferrals = 0, disk_write_waits = 0, disk_deferring_inputs = 0;
  // Block transfer (fuzz_export.cpp, fuzz_import.cpp): outcomes of the
  // export and import operations, printed at exit.
  uint64_t exports_ok = 0, exports_refused = 0, exports_unsupported = 0, exports_released = 0;
  uint64_t exports_orphaned = 0;  // released after their cache was destroyed
  uint64_t imports_ok = 0, imports_refused = 0, imports_aborted = 0, imports_no_room = 0;
  uint64_t imports_wrong_count = 0;  // completes with a wrong count first (refused, then OK)
  uint64_t imported_blocks = 0;      // blocks copied into an import and completed
  uint64_t imports_reused = 0;       // adds after a completed import that reused its blocks
};
extern Counters g_count;
extern uint32_t g_op;  // the program's operation code, for feedback
extern bool g_trace;  // KVC_FUZZ_TRACE: print every call of the program
// Prints like printf when g_trace is on (the program's calls, for a reproducer).
inline void trace(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void trace(const char* fmt, ...) {
  if (!g_trace) return;
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stdout, fmt, ap);
  va_end(ap);
}
// The call being checked, for finding(): its name and cache (no allocation).
extern const char* g_current;
extern int g_current_cache;
inline void set_current(int cache, const char* what) {
  g_current = what;
  g_current_cache = cache;
}

// The statuses a call may return.
class Expect {
 public:
  Expect& allow(kvc_status_t s) {
    bits_ |= bit(s);
    return *this;
  }
  Expect& forbid(kvc_status_t s) {
    bits_ &= ~bit(s);
    return *this;
  }
  bool allows(kvc_status_t s) const { return (bits_ & bit(s)) != 0; }
  bool empty() const { return bits_ == 0; }
  std::string str() const;

 private:
  static uint32_t bit(kvc_status_t s) {
    return s <= 0 && s >= -20 ? 1u << uint32_t(-s) : s == KVC_ERR_INTERNAL ? 1u << 30 : 1u << 31;
  }
  uint32_t bits_ = 0;
};

struct SeqModel {
  std::vector<int32_t> tokens;
  std::vector<uint64_t> hash;       // per position: scope, tokens up to it, extra keys begun
  std::vector<unsigned char> rows;  // per position: the K/V bytes of every (layer, kv, head)
  uint64_t prompt_len = 0, cached = 0, committed = 0;
  uint32_t prompt_priority = 0, decode_priority = 0;
  uint64_t scope = 0;
  std::vector<ExtraKeyModel> extras;
  std::vector<uint64_t> window_begin;  // per group: blocks before it released (-1)
  uint32_t scope_index = 0;  // for feedback
  uint32_t fork_depth = 0;
  bool shared = false;  // forked (parent or child): a committed block may stay unpublished
  std::shared_ptr<const Options> opts;  // as added (an export's import needs them)
  uint64_t length() const { return tokens.size(); }
};

// An export the program holds (kvc_cache_export_sequence): its blocks must
// stay in use, each at its position only, and hold the bytes they held
// when exported until kvc_export_release.
struct ExportModel {
  kvc_export_t* handle = nullptr;
  uint64_t seq_id = 0, num_blocks = 0;
  std::vector<int32_t> tokens;            // num_blocks * T
  std::shared_ptr<const Options> opts;    // the sequence's
  std::vector<std::vector<int32_t>> ids;  // per group, position 0 first
  std::vector<unsigned char> rows;        // the K/V rows of its positions
  std::vector<unsigned char> keys;        // the key blob
};

struct SeqState {
  kvc_sequence_desc_t desc;
  std::vector<std::vector<int32_t>> ids;  // per group
};

struct Snapshot {
  kvc_cache_stats_t stats;
  std::vector<kvc_group_stats_t> groups;
  std::vector<std::pair<uint64_t, SeqState>> seqs;  // by id, as the shadow's
  std::vector<unsigned char> pools;  // every byte of every primary pool
  uint64_t event_id = 0;             // newest event emitted (events on)
  const SeqState& seq(uint64_t id) const;
};

class CacheModel {
 public:
  // Creates the cache from `config` (must succeed) and learns its shape.
  CacheModel(int index, const kvc_config_t* config, bool host, bool manual_clock,
             bool block_reuse, bool events = false);
  ~CacheModel();
  CacheModel(const CacheModel&) = delete;
  CacheModel& operator=(const CacheModel&) = delete;

  kvc_cache_t* cache = nullptr;
  int index = 0;
  uint32_t T = 0, num_layers = 0, num_groups = 0, num_pools = 0, kv_factor = 0, head_dim = 0;
  kvc_dtype_t dtype = 0;
  uint32_t elem_size = 0;
  bool host = false, manual_clock = false, block_reuse = true;
  bool events = false;  // an event ring: mirrored after every change (fuzz_events.h)
  // A disk tier in this temporary directory ("": none), removed with the
  // cache. Adds may then find more than the probe (which reads the tree
  // only): blocks loaded from the disk, checked bit for bit as any reuse.
  std::string disk_dir;
  // How the program treats the disk writer (fuzz_disk.h): 0 flushes before
  // every add, resize and import, 1 never, 2 never and pauses the writer
  // after every call.
  int disk_mode = 0;
  uint64_t disk_seen_deferrals = 0, disk_seen_waits = 0;  // the chain's counters at the last call
  EventMirror mirror;
  // One pool, or pools split statically: a pool's free and cached blocks
  // tell exactly what a call can have (with shared pages they move).
  bool static_pools = true;
  std::vector<kvc_layer_view_t> views;  // per layer
  std::vector<uint32_t> window;         // per group (0: full attention)
  std::vector<uint32_t> group_pool;     // per group
  std::vector<uint32_t> pool_groups;    // per pool: groups drawing from it
  std::vector<kvc_pool_desc_t> pools;
  kvc_cache_desc_t desc;
  uint64_t clock_ms = 0;

  std::map<uint64_t, SeqModel> seqs;
  std::set<uint64_t> pins;
  std::vector<ExportModel> exports;  // held by the program (fuzz_export.cpp)
  // The receiver of imports: a cache of the same configuration, created
  // by the first import (fuzz_import.cpp), drained and destroyed with
  // the program.
  std::unique_ptr<CacheModel> twin;
  kvc_config_t* config = nullptr;  // kept for the twin; owned
  uint64_t disk_bytes = 0;         // the disk tier's size (the twin gets its own directory)
  std::vector<uint64_t> group_block_bytes;  // per group (kvc_group_desc_t block_bytes)
  std::vector<uint32_t> group_first_layer;  // per group
  std::map<int32_t, uint32_t> committed_scope;  // first token -> scope index of its last commit
  Snapshot last;  // the state after the last checked call

  // --- calls ------------------------------------------------------------
  // Runs one call of the program: its status must be one `e` allows; a
  // failure (and a call that only reads) must change nothing.
  template <class F>
  kvc_status_t call(const char* what, const Expect& e, bool reads_only, F&& f) {
    ++g_count.calls;
    const kvc_status_t st = f();
    checked(what, e, st, reads_only);
    return st;
  }
  // After a successful change, once the shadow is updated: writes the K/V
  // of the positions each sequence gained (from[i] on for ids[i]) through
  // slot mappings and kvc_store_kv, then checks everything.
  void settle(const std::vector<uint64_t>& ids = {}, const std::vector<uint64_t>& from = {},
              bool small_buffer_first = false);

  // --- shadow helpers -----------------------------------------------------
  // Hashes and K/V bytes of positions [from, length) of s.
  void fill(SeqModel& s, uint64_t from) const;
  uint64_t first_needed(uint32_t g, uint64_t frontier) const {
    const uint64_t w = window[g];
    return w == 0 || frontier + 1 <= w ? 0 : (frontier + 1 - w) / T;
  }
  uint64_t blocks_for(uint64_t tokens) const { return (tokens + T - 1) / T; }
  // Whether `sets` block sets (a block of every group) certainly fit in the
  // free blocks / certainly exceed free + cached (static pools only).
  bool sets_fit_free(uint64_t sets) const;
  bool sets_exceed_all(uint64_t sets) const;
  // Whether write-through jobs hold blocks now (in use until taken back:
  // the disk configuration, fuzz_disk.h).
  bool writes_hold_blocks() const;

  // After a successful kvc_cache_resize: the pools' and layers' sizes
  // again (their addresses must not have moved), and the next settle()
  // accepts the new block count.
  void relearn_pools();
  bool resized = false;

  size_t row_bytes() const { return row_bytes_; }  // one position's K/V in SeqModel::rows
  void take(Snapshot& s);  // through the public API (reusing s's buffers)
  void check_all();  // take + verify + remember: after end-of-input cleanup

 private:
  void checked(const char* what, const Expect& e, kvc_status_t st, bool reads_only);
  void verify(const Snapshot& now);
  void verify_content(const Snapshot& now) const;
  void compare_row(const unsigned char* want, uint64_t pos, const std::vector<std::vector<int32_t>>& ids,
                   const char* whose, uint64_t id, const SeqModel* m) const;
  void unchanged(const Snapshot& now, const char* what) const;
  bool took_back_writes(const Snapshot& now);
  void write_kv(const std::vector<uint64_t>& ids, const std::vector<uint64_t>& from,
                bool small_buffer_first);
  void elem(unsigned char* out, uint64_t h, uint32_t layer, uint32_t kv, uint32_t head,
            uint32_t d) const;

  Snapshot scratch_;
  std::vector<int64_t> where_;  // per pool block: (group, position) + 1 during verify
  std::vector<size_t> where_base_;  // per pool: its first entry in where_
  std::vector<uint64_t> held_;      // per group: distinct blocks sequences hold
  size_t row_bytes_ = 0;
  std::vector<size_t> chunk_;  // offset of (layer, kv, head) in a row: [layer][kv][head]
  std::vector<uint32_t> layer_chunk_;  // first chunk index of each layer
};

}  // namespace kvc_fuzz
