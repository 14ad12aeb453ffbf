// The stateful contiguous mode (OpenVINO's stateful KV cache; the C API and
// the policies are described in include/kvcache/stateful.h): per layer one
// buffer of B rows, in-place append with staggered growth, beam table
// reorder without moving K/V, indirect decode. It shares the Device and the
// kernels' conventions with the paged cache, not its manager. One lock
// serializes every call; a call that fails changes nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/device.h"
#include "kvcache/stateful.h"
#include "stateful/beam_book.h"
#include "stateful/growth_policy.h"
#include "stateful/state_format.h"

namespace kvc {

// The model a stateful cache holds: what it reads of a kvc_config_t (the C
// API checks the config and copies these; the paged settings stay there).
struct StatefulModel {
  uint32_t num_layers = 0;
  std::vector<uint32_t> kv_heads;  // one per layer
  uint32_t head_dim = 0;
  kvc_dtype_t dtype = KVC_DTYPE_BF16;
  uint32_t kv_factor = 2;
  kvc_device_kind_t device_kind = KVC_DEVICE_CPU;
  int32_t device_ordinal = 0;
};

struct StatefulOptions {
  uint32_t batch = 0;
  kvc_layout_t layout = KVC_LAYOUT_HND;
  uint32_t growth_step = 128;
  bool staggered = true;
  uint32_t max_length = KVC_STATEFUL_MAX_LENGTH;
  uint32_t initial_length = 0;

  // From the C struct: defaults for zeros, every value checked.
  static StatefulOptions from(const kvc_stateful_options_t& o);
};

struct StatefulStats {
  uint64_t bytes_allocated = 0;
  uint64_t peak_bytes = 0;
  uint64_t kv_bytes = 0;
  uint64_t table_bytes = 0;
  uint64_t reallocations = 0;
  uint64_t reorders = 0;
  uint64_t table_entries_copied = 0;
  uint64_t compactions = 0;
};

struct StatefulLayerStats {
  uint32_t capacity = 0;
  uint32_t growth_offset = 0;
  uint64_t bytes = 0;
  uint64_t reallocations = 0;
  uint32_t last_growth_length = 0;
  uint32_t max_length = 0;
};

// What kvc_stateful_decode asks, resolved from the C struct.
struct StatefulDecodeArgs {
  uint32_t layer = 0;
  uint32_t q_heads = 0;
  kvc_dtype_t q_dtype = 0;
  const void* query = nullptr;
  void* out = nullptr;
  uint32_t max_seq_len = 0;
  float softmax_scale = 0.0f;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  void* workspace = nullptr;
  uint64_t workspace_bytes = 0;
};

class StatefulCache {
 public:
  // `device` null: the model's device. Throws Error on a bad model.
  StatefulCache(const StatefulModel& model, const StatefulOptions& options,
                std::unique_ptr<Device> device = nullptr);
  ~StatefulCache();
  StatefulCache(const StatefulCache&) = delete;
  StatefulCache& operator=(const StatefulCache&) = delete;

  uint32_t num_layers() const { return L_; }
  uint32_t batch() const { return B_; }
  const GrowthPolicy& policy() const { return policy_; }
  Device& device() { return *dev_; }

  // Reads.
  kvc_stateful_view_t view(uint32_t layer) const;
  std::vector<uint32_t> lengths(uint32_t layer) const;
  StatefulStats stats() const;
  StatefulLayerStats layer_stats(uint32_t layer) const;

  // kvc_stateful_append_args_t, checked here.
  void append(const kvc_stateful_append_args_t& a, void* stream);
  void reorder(const int32_t* beam_idx, uint32_t count, void* stream);
  void compact(void* stream);
  void trim(uint32_t row, uint32_t num_tokens, void* stream);
  void reset(bool release_memory, void* stream);
  // Returns the bytes the state takes; writes them when capacity allows.
  uint64_t export_row(uint32_t row, void* buffer, uint64_t capacity, void* stream);
  void import_row(uint32_t row, const void* buffer, uint64_t size, void* stream);

  uint64_t decode_workspace_bytes(const StatefulDecodeArgs& a) const;
  void decode(const StatefulDecodeArgs& a, void* stream);
  AsyncError async_error(void* stream);

 private:
  struct Layer {
    void* buf = nullptr;
    uint32_t heads = 0;
    uint32_t capacity = 0;
    uint64_t bytes = 0;
    uint64_t reallocations = 0;
    uint32_t last_growth_length = 0;
  };
  // A buffer allocated for a layer (or the table) but not installed yet.
  struct Growth {
    uint32_t layer = 0;  // num_layers(): the beam table
    uint32_t capacity = 0;
    void* buf = nullptr;
    uint64_t bytes = 0;
  };

  void check_layer(uint32_t layer) const;
  uint64_t layer_bytes(uint32_t heads, uint32_t capacity) const;
  RowLayer row_layer(uint32_t layer) const;
  RowLayer row_layer_of(uint32_t layer, void* buf, uint32_t capacity) const;
  uint32_t& len(uint32_t layer, uint32_t row) { return len_[uint64_t(layer) * B_ + row]; }
  uint32_t len(uint32_t layer, uint32_t row) const { return len_[uint64_t(layer) * B_ + row]; }
  uint32_t max_len(uint32_t layer) const;
  // Every layer has the same length per row; else Error(INVALID_STATE).
  void require_equal_layers(const char* call) const;
  std::vector<uint32_t> row_lengths() const;  // layer 0's, after the check above

  // Allocates the buffers `growths` name (layer, capacity). Throws, having
  // freed what it allocated, when one fails: nothing changed.
  void allocate_growths(std::vector<Growth>& growths, void* stream);
  // Copies the past into the new buffers, frees the old ones, updates stats.
  void install_growths(std::vector<Growth>& growths, void* stream);
  void release_growths(std::vector<Growth>& growths, void* stream) noexcept;
  // The growths positions [0, need) of `layer` (and of the table) need.
  void plan_growth(uint32_t layer, uint32_t need, std::vector<Growth>& out) const;
  void plan_table_growth(uint32_t need, std::vector<Growth>& out) const;
  // Copies positions [0, length) between two buffers of one layer.
  void copy_positions(uint32_t layer, void* dst, uint32_t dst_cap, const void* src,
                      uint32_t src_cap, uint32_t length, void* stream);

  // The beam table: a fresh one where row r reads itself at every position.
  void create_table(uint32_t capacity, void* stream);
  void free_table(void* stream) noexcept;
  // Identity entries r for positions [from, to) of rows [first, first + n).
  void fill_table(uint32_t first, uint32_t n, uint32_t from, uint32_t to, void* stream);
  void upload_lengths(void* stream);
  // The readers' bounds of book_ said a write into row `row` may hit a
  // reader: reads the table back (once per call, into `table`), makes the
  // bounds exact, and returns a row other than `row` that reads one of
  // `row`'s positions [from, to) in layer `layer` (to = UINT32_MAX: any
  // layer, any position), with the position, or -1.
  int64_t exact_reader(std::vector<int32_t>& table, uint32_t layer, uint32_t row, uint32_t from,
                       uint32_t to, uint32_t* position, void* stream);

  void track_alloc(uint64_t bytes);
  void track_free(uint64_t bytes);
  StateGeometry geometry() const;

  mutable std::mutex mu_;
  std::unique_ptr<Device> dev_;
  StatefulModel cfg_;
  uint32_t L_ = 0;
  uint32_t B_ = 0;
  kvc_layout_t layout_ = KVC_LAYOUT_HND;
  uint64_t es_ = 0;
  GrowthPolicy policy_;
  std::vector<Layer> layers_;
  std::vector<uint32_t> len_;        // [L][B] host copy of the lengths
  int32_t* lengths_dev_ = nullptr;   // [L][B] on the device
  int32_t* identity_dev_ = nullptr;  // [B]: 0, 1, ..., B - 1
  uint64_t fixed_bytes_ = 0;
  int32_t* table_ = nullptr;         // [B][table_cap_] when the book is active
  uint32_t table_cap_ = 0;
  BeamBook book_;
  StatefulStats stats_;
};

}  // namespace kvc
