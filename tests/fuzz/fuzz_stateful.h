// The stateful configuration (kvcache_fuzz_stateful): programs over 0-2
// small stateful caches (include/kvcache/stateful.h) checked call by call
// against a shadow: per layer and row the logical token history (what the
// row reads through the beam table), per row the physical row each
// position is read from (the table as the header defines it), the layers'
// capacities on the growth policy's grid, and the statistics.
//  - after a successful change: every byte seen through the layer views and
//    the beam table equals the shadow's, lengths, views, capacities,
//    reallocations, counters and byte totals as the model says, peak bytes
//    within the bounds of what the call allocated;
//  - after a failed call or one that only reads: nothing changed (lengths,
//    views, every byte of every buffer and of the table, statistics, the
//    device allocations);
//  - injected growth / table / scratch allocation failures (the backend's
//    fault hook) must fail the call with KVC_ERR_OUT_OF_MEMORY, changing
//    nothing and leaking nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <kvcache/kvcache.h>

#include "backend/fault_hook.h"
#include "fuzz_input.h"
#include "fuzz_model.h"

namespace kvc_fuzz {

// What a stateful cache was created with.
struct StGeometry {
  uint32_t L = 1, B = 1, D = 2, kv = 2, es = 4;
  kvc_dtype_t dtype = KVC_DTYPE_F32;
  kvc_layout_t layout = KVC_LAYOUT_HND;
  std::vector<uint32_t> heads;  // per layer
  uint32_t step = 1, max_length = 8, initial_length = 0;
  bool staggered = true;
  // The geometry an exported state carries (import needs it equal).
  bool same_state_format(const StGeometry& o) const {
    return L == o.L && D == o.D && kv == o.kv && dtype == o.dtype && layout == o.layout &&
           heads == o.heads;
  }
  // Bytes of one position of layer l in the shadow: [kv][head][D] elements.
  size_t pos_bytes(uint32_t l) const { return size_t(kv) * heads[l] * D * es; }
  // The growth policy of the header: o_l + k * step (k >= 1), capped.
  uint32_t offset(uint32_t l) const { return staggered ? uint32_t(uint64_t(l) * step / L) : 0; }
  uint32_t capacity_for(uint32_t l, uint32_t need) const;
  uint64_t layer_bytes(uint32_t l, uint32_t cap) const {
    return uint64_t(kv) * B * heads[l] * cap * D * es;
  }
};

// The backend's fault hook on a cache's device: the n-th allocation from
// now fails; live allocations are counted.
class StFaults final : public kvc::FaultHook {
 public:
  uint32_t fail_in = 0;
  bool fired = false;
  int64_t live = 0;
  bool fail(kvc::FaultSite site) override;
  void allocated(kvc::FaultSite, const void* p) override { live += p != nullptr; }
  void released(kvc::FaultSite, const void*) override { --live; }
};

struct StSnapshot {
  std::vector<kvc_stateful_view_t> views;
  std::vector<kvc_stateful_layer_stats_t> lstats;
  std::vector<std::vector<uint32_t>> lengths;     // kvc_stateful_get_lengths per layer
  std::vector<std::vector<unsigned char>> bufs;   // every byte of each layer's buffer
  std::vector<int32_t> table;                     // every entry of the beam table
  kvc_stateful_stats_t stats{};
  int64_t live = 0;                               // device allocations held
};

// What a successful change may have allocated, for the checks of the peak
// bytes and the views (see settle()).
struct StChange {
  bool may_move = false;         // append, import, compact, reset: views may change
  std::vector<uint64_t> grown;   // bytes of the layer buffers the call allocated
  bool table_alloc = false;      // the call may allocate a beam table (create or grow)
  uint64_t scratch = 0;          // a scratch buffer held beside everything (compaction)
  uint64_t copied_bound = 0;     // most beam table entries the call may move
};

// An exported row state kept for later imports.
struct SavedState {
  StGeometry g;
  uint32_t length = 0;
  uint64_t header = 0;  // bytes before the first layer's data
  std::vector<unsigned char> bytes;
};

class StModel {
 public:
  StModel(int index, const StGeometry& g, kvc_stateful_t* handle);
  ~StModel();
  StModel(const StModel&) = delete;
  StModel& operator=(const StModel&) = delete;

  int index;
  StGeometry g;
  kvc_stateful_t* h;
  StFaults faults;
  int64_t pre_hook_allocs = 0;  // made in kvc_stateful_create, before the hook

  // --- shadow ---------------------------------------------------------------
  std::vector<std::vector<std::vector<unsigned char>>> hist;  // [l][r]: positions of pos_bytes(l)
  std::vector<std::vector<int32_t>> src;  // [r][t]: physical row position t is read from
  std::vector<uint32_t> cap;              // per layer
  std::vector<uint64_t> reallocs;         // per layer
  std::vector<uint32_t> last_growth;      // per layer: longest row when it last allocated
  bool table = false;
  uint64_t reallocations = 0, reorders = 0, compactions = 0;
  uint64_t fixed_bytes = 0;               // bytes_allocated beside K/V and table
  uint64_t header_bytes = 0;              // of an exported state (learned)
  StSnapshot last;

  uint32_t len(uint32_t l, uint32_t r) const { return uint32_t(hist[l][r].size() / g.pos_bytes(l)); }
  uint32_t max_len(uint32_t l) const;
  bool equal_layers() const;
  uint32_t table_stride() const { return last.views.empty() ? 0 : last.views[0].beam_table_stride; }
  // Positions of row x that another row reads in layer l through the table,
  // among [from, to): the exact conflict the header forbids writing.
  bool read_by_other(uint32_t l, uint32_t x, uint32_t from, uint32_t to) const;
  bool read_by_other_any(uint32_t x) const;
  // Allocates layer l for `need` positions in the shadow (a growth when it
  // had a buffer); returns the new buffer's bytes or 0 when none is needed.
  uint64_t grow(uint32_t l, uint32_t need);

  // --- calls ------------------------------------------------------------------
  // Runs one call: its status must be one `e` allows; a failed call and one
  // that only reads must change nothing. `allocs` is how many device
  // allocations the call makes when it succeeds: an armed fault at or below
  // it must fail the call with KVC_ERR_OUT_OF_MEMORY.
  template <class F>
  kvc_status_t call(const char* what, Expect e, bool reads_only, uint32_t allocs, F&& f) {
    ++g_count.calls;
    set_current(index, what);
    // An armed fault waits for a call that allocates (the hook is set for
    // every call until then: one that allocates nothing must not fire it).
    const uint32_t armed = pending_fault;
    if (allocs > 0) pending_fault = 0;
    if (armed != 0) {
      if (armed <= allocs && e.allows(KVC_OK)) e.forbid(KVC_OK).allow(KVC_ERR_OUT_OF_MEMORY);
      faults.fail_in = armed;
      faults.fired = false;
    }
    const kvc_status_t st = f();
    const bool fired = faults.fired;
    if (fired) pending_fault = 0;
    faults.fail_in = 0;
    faults.fired = false;
    checked(what, e, st, reads_only, armed, allocs, fired);
    return st;
  }
  uint32_t pending_fault = 0;  // set by the program: the next call's fault

  // After a successful change, once the shadow is updated.
  void settle(const StChange& c);
  void take(StSnapshot& s) const;

 private:
  void checked(const char* what, const Expect& e, kvc_status_t st, bool reads_only,
               uint32_t armed, uint32_t allocs, bool fired);
  void verify(const StSnapshot& now, const StChange& c) const;
  void verify_bytes(const StSnapshot& now) const;
  void unchanged(const StSnapshot& now, const char* what) const;
  StSnapshot scratch_;
};

// Counts of what the stateful programs met, printed at exit.
struct StCounters {
  uint64_t faults = 0;        // injected allocation failures
  uint64_t decodes = 0;       // decodes compared with a plain copy and the reference
};
extern StCounters g_st;

kvc_config_t* st_config(const StGeometry& g);  // caller destroys
kvc_stateful_options_t st_options(const StGeometry& g);

class StProgram {
 public:
  StProgram(Input& in, std::vector<std::unique_ptr<StModel>>& caches) : in_(in), caches_(caches) {}
  void run();

 private:
  StModel& c() { return *caches_[cur_]; }
  uint32_t rand32();
  void step(bool beam);
  void append_one();
  kvc_status_t append(uint32_t layer, uint32_t n, const std::vector<uint32_t>* rows,
                      uint8_t hostile);
  void reorder();
  void trim();
  void do_trim(uint32_t row, uint32_t n);
  void reset();
  void do_reset(bool release);
  void compact();
  void export_row();
  void import_row();
  void decode();
  void workspace_size();
  void view_queries();
  void stats_queries();
  void async_error();
  void null_handle();
  std::vector<unsigned char> export_state(StModel& m, uint32_t row);  // checked

  Input& in_;
  std::vector<std::unique_ptr<StModel>>& caches_;
  size_t cur_ = 0;
  uint64_t nonce_ = 0;
  std::vector<SavedState> saved_;
};

// One input of the stateful configuration: the caches and the program.
void stateful_one_input(Input& in);

// Elements of the dtypes (fuzz_stateful_numeric.cpp).
float st_load(const unsigned char* p, kvc_dtype_t dtype, size_t i);
// Stores a value exactly representable in `dtype` (the harness makes only those).
void st_store_exact(unsigned char* p, kvc_dtype_t dtype, size_t i, float v);
size_t st_dtype_size(kvc_dtype_t dtype);
// A moderate element (|x| < 4, exact in every dtype) from a random word.
void st_moderate(unsigned char* p, kvc_dtype_t dtype, size_t i, uint32_t r);

}  // namespace kvc_fuzz
