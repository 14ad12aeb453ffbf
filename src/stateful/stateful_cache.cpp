// StatefulCache: lifetime, views, statistics, growth and append. Beam
// table calls are in stateful_beams.cpp, row state calls in
// stateful_rows.cpp, decode in stateful_decode.cpp.
#include "stateful/stateful_cache.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/dtype.h"
#include "base/error.h"

namespace kvc {

namespace {

std::string str(uint64_t v) { return std::to_string(v); }

void check_scale(float s, const char* name) {
  if (!(std::isfinite(s) && s > 0.0f))
    invalid_argument(std::string(name) + " must be finite and > 0, got " + std::to_string(s));
}

}  // namespace

StatefulOptions StatefulOptions::from(const kvc_stateful_options_t& o) {
  StatefulOptions r;
  if (o.batch == 0 || o.batch > KVC_STATEFUL_MAX_BATCH)
    invalid_argument("batch must be in 1.." + str(KVC_STATEFUL_MAX_BATCH) + ", got " +
                     str(o.batch));
  r.batch = o.batch;
  if (o.layout != 0 && o.layout != KVC_LAYOUT_NHD && o.layout != KVC_LAYOUT_HND)
    invalid_argument("layout must be 0 (HND), KVC_LAYOUT_NHD (1) or KVC_LAYOUT_HND (2), got " +
                     str(o.layout));
  r.layout = o.layout == 0 ? kvc_layout_t(KVC_LAYOUT_HND) : o.layout;
  if (o.growth_step > 65536)
    invalid_argument("growth_step must be in 1..65536 tokens (0 = 128), got " +
                     str(o.growth_step));
  r.growth_step = o.growth_step == 0 ? 128 : o.growth_step;
  if (o.growth_policy > KVC_GROWTH_UNIFORM)
    invalid_argument("growth_policy must be KVC_GROWTH_STAGGERED (1) or KVC_GROWTH_UNIFORM (2) "
                     "(0 = staggered), got " + str(o.growth_policy));
  r.staggered = o.growth_policy != KVC_GROWTH_UNIFORM;
  if (o.max_length > KVC_STATEFUL_MAX_LENGTH)
    invalid_argument("max_length must be <= 2^30 (0 = 2^30), got " + str(o.max_length));
  r.max_length = o.max_length == 0 ? KVC_STATEFUL_MAX_LENGTH : o.max_length;
  if (o.initial_length > r.max_length)
    invalid_argument("initial_length (" + str(o.initial_length) + ") is above max_length (" +
                     str(r.max_length) + ")");
  r.initial_length = o.initial_length;
  return r;
}

StatefulCache::StatefulCache(const StatefulModel& model, const StatefulOptions& options,
                             std::unique_ptr<Device> device)
    : cfg_(model), book_(options.batch) {
  if (cfg_.num_layers == 0 || cfg_.kv_heads.size() != cfg_.num_layers)
    invalid_argument("the model needs num_layers > 0 and one kv_heads value per layer, got " +
                     str(cfg_.num_layers) + " layers and " + str(cfg_.kv_heads.size()) + " values");
  for (uint32_t h : cfg_.kv_heads)
    if (h == 0) invalid_argument("kv_heads must be > 0");
  if (cfg_.head_dim == 0) invalid_argument("head_dim must be > 0");
  if (dtype_size(cfg_.dtype) == 0) invalid_argument("unknown dtype " + str(cfg_.dtype));
  if (cfg_.kv_factor != 1 && cfg_.kv_factor != 2)
    invalid_argument("kv_factor must be 1 or 2, got " + str(cfg_.kv_factor));
  if (options.batch == 0 || options.batch > kStatefulMaxRows)
    invalid_argument("batch must be in 1.." + str(kStatefulMaxRows) + ", got " +
                     str(options.batch));
  dev_ = device != nullptr ? std::move(device)
                           : create_device(cfg_.device_kind, cfg_.device_ordinal);
  L_ = cfg_.num_layers;
  B_ = options.batch;
  layout_ = options.layout;
  es_ = dtype_size(cfg_.dtype);
  policy_.num_layers = L_;
  policy_.step = options.growth_step;
  policy_.max_length = options.max_length;
  policy_.staggered = options.staggered;
  layers_.resize(L_);
  for (uint32_t l = 0; l < L_; ++l) layers_[l].heads = cfg_.kv_heads[l];
  len_.assign(uint64_t(L_) * B_, 0);

  try {
    const uint64_t len_bytes = 4ull * L_ * B_;
    lengths_dev_ = static_cast<int32_t*>(dev_->allocate(len_bytes));
    track_alloc(len_bytes);
    identity_dev_ = static_cast<int32_t*>(dev_->allocate(4ull * B_));
    track_alloc(4ull * B_);
    fixed_bytes_ = len_bytes + 4ull * B_;
    std::vector<int32_t> ids(B_);
    for (uint32_t r = 0; r < B_; ++r) ids[r] = int32_t(r);
    dev_->copy_2d(identity_dev_, 0, ids.data(), 0, 4ull * B_, 1, CopyKind::kHostToDevice, nullptr);
    upload_lengths(nullptr);
    if (options.initial_length > 0) {
      std::vector<Growth> g;
      for (uint32_t l = 0; l < L_; ++l) plan_growth(l, options.initial_length, g);
      allocate_growths(g, nullptr);
      install_growths(g, nullptr);
    }
    dev_->synchronize(nullptr);
  } catch (...) {
    for (Layer& l : layers_) dev_->deallocate_on(l.buf, nullptr);
    dev_->deallocate(identity_dev_);
    dev_->deallocate(lengths_dev_);
    throw;
  }
}

StatefulCache::~StatefulCache() {
  // Buffers and table came from allocate_on: freed the same way.
  for (Layer& l : layers_) dev_->deallocate_on(l.buf, nullptr);
  dev_->deallocate_on(table_, nullptr);
  try {
    dev_->synchronize(nullptr);
  } catch (...) {
  }
  dev_->deallocate(identity_dev_);
  dev_->deallocate(lengths_dev_);
}

void StatefulCache::check_layer(uint32_t layer) const {
  if (layer >= L_)
    invalid_argument("layer must be < num_layers (" + str(L_) + "), got " + str(layer));
}

uint64_t StatefulCache::layer_bytes(uint32_t heads, uint32_t capacity) const {
  return uint64_t(cfg_.kv_factor) * B_ * heads * uint64_t(capacity) * cfg_.head_dim * es_;
}

RowLayer StatefulCache::row_layer_of(uint32_t layer, void* buf, uint32_t capacity) const {
  RowLayer r;
  const uint64_t H = layers_[layer].heads, D = cfg_.head_dim;
  r.base = buf;
  if (layout_ == KVC_LAYOUT_HND) {
    r.token_stride = D * es_;
    r.head_stride = uint64_t(capacity) * D * es_;
  } else {
    r.head_stride = D * es_;
    r.token_stride = H * D * es_;
  }
  r.row_stride = H * uint64_t(capacity) * D * es_;
  r.kv_stride = r.row_stride * B_;
  r.rows = B_;
  r.capacity = capacity;
  r.kv_heads = uint32_t(H);
  r.head_dim = cfg_.head_dim;
  r.kv_factor = cfg_.kv_factor;
  r.dtype = cfg_.dtype;
  r.layer = layer;
  return r;
}

RowLayer StatefulCache::row_layer(uint32_t layer) const {
  return row_layer_of(layer, layers_[layer].buf, layers_[layer].capacity);
}

uint32_t StatefulCache::max_len(uint32_t layer) const {
  uint32_t m = 0;
  for (uint32_t r = 0; r < B_; ++r) m = std::max(m, len(layer, r));
  return m;
}

void StatefulCache::require_equal_layers(const char* call) const {
  for (uint32_t l = 1; l < L_; ++l)
    for (uint32_t r = 0; r < B_; ++r)
      if (len(l, r) != len(0, r))
        fail(KVC_ERR_INVALID_STATE,
             std::string(call) + " needs every layer at the same length (between steps), but row " +
                 str(r) + " has " + str(len(0, r)) + " tokens in layer 0 and " + str(len(l, r)) +
                 " in layer " + str(l));
}

std::vector<uint32_t> StatefulCache::row_lengths() const {
  return std::vector<uint32_t>(len_.begin(), len_.begin() + B_);
}

void StatefulCache::track_alloc(uint64_t bytes) {
  stats_.bytes_allocated += bytes;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_allocated);
}

void StatefulCache::track_free(uint64_t bytes) { stats_.bytes_allocated -= bytes; }

void StatefulCache::upload_lengths(void* stream) {
  std::vector<int32_t> v(len_.begin(), len_.end());
  dev_->copy_2d(lengths_dev_, 0, v.data(), 0, 4ull * v.size(), 1, CopyKind::kHostToDevice, stream);
}

// ---------------------------------------------------------------------------
// Growth: allocate every new buffer first (a failure frees them and changes
// nothing), then copy the past and free the old buffers.
// ---------------------------------------------------------------------------

void StatefulCache::plan_growth(uint32_t layer, uint32_t need, std::vector<Growth>& out) const {
  if (need <= layers_[layer].capacity) return;
  Growth g;
  g.layer = layer;
  g.capacity = policy_.capacity_for(layer, need);
  g.bytes = layer_bytes(layers_[layer].heads, g.capacity);
  out.push_back(g);
}

void StatefulCache::plan_table_growth(uint32_t need, std::vector<Growth>& out) const {
  if (!book_.active() || need <= table_cap_) return;
  Growth g;
  g.layer = L_;
  const uint64_t cap = (uint64_t(need) + policy_.step - 1) / policy_.step * policy_.step;
  g.capacity = uint32_t(std::min<uint64_t>(cap, policy_.max_length));
  g.bytes = 4ull * B_ * g.capacity;
  out.push_back(g);
}

void StatefulCache::allocate_growths(std::vector<Growth>& growths, void* stream) {
  uint64_t total = 0;
  try {
    for (Growth& g : growths) {
      g.buf = dev_->allocate_on(g.bytes, stream);
      total += g.bytes;
    }
  } catch (...) {
    release_growths(growths, stream);
    throw;
  }
  // Old and new buffers coexist until install_growths frees the old ones.
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_allocated + total);
}

void StatefulCache::release_growths(std::vector<Growth>& growths, void* stream) noexcept {
  for (Growth& g : growths) {
    if (g.buf != nullptr) dev_->deallocate_on(g.buf, stream);
    g.buf = nullptr;
  }
}

void StatefulCache::copy_positions(uint32_t layer, void* dst, uint32_t dst_cap, const void* src,
                                   uint32_t src_cap, uint32_t length, void* stream) {
  if (length == 0) return;
  const uint64_t H = layers_[layer].heads, D = cfg_.head_dim;
  if (layout_ == KVC_LAYOUT_HND) {
    // kv * rows * heads runs of `capacity` positions each.
    dev_->copy_2d(dst, uint64_t(dst_cap) * D * es_, src, uint64_t(src_cap) * D * es_,
                  uint64_t(length) * D * es_, uint64_t(cfg_.kv_factor) * B_ * H,
                  CopyKind::kDeviceToDevice, stream);
  } else {
    dev_->copy_2d(dst, uint64_t(dst_cap) * H * D * es_, src, uint64_t(src_cap) * H * D * es_,
                  uint64_t(length) * H * D * es_, uint64_t(cfg_.kv_factor) * B_,
                  CopyKind::kDeviceToDevice, stream);
  }
}

void StatefulCache::install_growths(std::vector<Growth>& growths, void* stream) {
  // The copies may fail (a device error): then the new buffers go and the
  // old ones stay, so nothing changed.
  try {
    for (const Growth& g : growths) {
      if (g.layer == L_) {
        dev_->copy_2d(g.buf, 4ull * g.capacity, table_, 4ull * table_cap_, 4ull * table_cap_, B_,
                      CopyKind::kDeviceToDevice, stream);
      } else {
        const Layer& l = layers_[g.layer];
        if (l.buf != nullptr)
          copy_positions(g.layer, g.buf, g.capacity, l.buf, l.capacity, max_len(g.layer), stream);
      }
    }
  } catch (...) {
    release_growths(growths, stream);
    throw;
  }
  for (Growth& g : growths) {
    if (g.layer == L_) {
      const uint32_t old_cap = table_cap_;
      dev_->deallocate_on(table_, stream);
      track_free(stats_.table_bytes);
      table_ = static_cast<int32_t*>(g.buf);
      table_cap_ = g.capacity;
      stats_.table_bytes = g.bytes;
      track_alloc(g.bytes);
      // Entries past the old capacity read their own row until written.
      fill_table(0, B_, old_cap, table_cap_, stream);
    } else {
      Layer& l = layers_[g.layer];
      if (l.buf != nullptr) {
        ++l.reallocations;
        ++stats_.reallocations;
        dev_->deallocate_on(l.buf, stream);
        track_free(l.bytes);
        stats_.kv_bytes -= l.bytes;
      }
      l.buf = g.buf;
      l.capacity = g.capacity;
      l.bytes = g.bytes;
      l.last_growth_length = max_len(g.layer);
      track_alloc(g.bytes);
      stats_.kv_bytes += g.bytes;
    }
    g.buf = nullptr;
  }
}

// ---------------------------------------------------------------------------
// Append
// ---------------------------------------------------------------------------

void StatefulCache::append(const kvc_stateful_append_args_t& a, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  check_layer(a.layer);
  // The argument rules of kvc_store_kv.
  const bool fp8 = cfg_.dtype == KVC_DTYPE_FP8_E4M3;
  const bool float_in = a.src_dtype == KVC_DTYPE_F32 || a.src_dtype == KVC_DTYPE_F16 ||
                        a.src_dtype == KVC_DTYPE_BF16;
  if (a.src_dtype != cfg_.dtype && !(fp8 && float_in))
    invalid_argument("src_dtype " + std::string(dtype_name(a.src_dtype)) + " (" +
                     str(a.src_dtype) + ") cannot be stored in a " + dtype_name(cfg_.dtype) +
                     " cache (it must equal the cache dtype; an fp8_e4m3 cache also takes f32, "
                     "f16 or bf16)");
  if (cfg_.kv_factor == 1 && a.value != nullptr)
    invalid_argument("value must be NULL for a cache with kv_factor 1 (K and V are one tensor)");
  if (a.num_tokens > policy_.max_length)
    invalid_argument("num_tokens (" + str(a.num_tokens) + ") is above max_length (" +
                     str(policy_.max_length) + ")");
  if (a.num_tokens > 0) {
    if (a.key == nullptr) invalid_argument("key must not be NULL");
    if (cfg_.kv_factor == 2 && a.value == nullptr) invalid_argument("value must not be NULL");
    if (fp8 && a.src_dtype != cfg_.dtype) {
      check_scale(a.k_scale, "k_scale");
      if (cfg_.kv_factor == 2) check_scale(a.v_scale, "v_scale");
    }
  }
  if (a.num_tokens == 0) return;

  const uint32_t l = a.layer;
  std::vector<uint32_t> pos(B_), cnt(B_);
  std::vector<int32_t> table;  // read back when a reader bound says a write may hit a reader
  uint32_t need = 0;
  for (uint32_t r = 0; r < B_; ++r) {
    cnt[r] = a.row_tokens != nullptr ? a.row_tokens[r] : a.num_tokens;
    if (cnt[r] > a.num_tokens)
      invalid_argument("row_tokens[" + str(r) + "] = " + str(cnt[r]) + " is above num_tokens (" +
                       str(a.num_tokens) + ")");
    pos[r] = len(l, r);
    if (cnt[r] == 0) continue;
    const uint64_t end = uint64_t(pos[r]) + cnt[r];
    if (end > policy_.max_length)
      invalid_argument("appending " + str(cnt[r]) + " tokens to row " + str(r) + " of layer " +
                       str(l) + " (length " + str(pos[r]) + ") would pass max_length " +
                       str(policy_.max_length));
    uint32_t at = 0;
    const int64_t reader = pos[r] < book_.protected_length(r)
                               ? exact_reader(table, l, r, pos[r], uint32_t(end), &at, stream)
                               : -1;
    if (reader >= 0)
      fail(KVC_ERR_INVALID_STATE,
           "row " + str(r) + " of layer " + str(l) + " would write positions [" + str(pos[r]) +
               ", " + str(end) + "), but row " + str(uint64_t(reader)) + " reads row " + str(r) +
               "'s buffer at position " + str(at) +
               " through the beam table; call kvc_stateful_compact() first");
    need = std::max(need, uint32_t(end));
  }
  if (need == 0) return;

  std::vector<Growth> growths;
  plan_growth(l, need, growths);
  plan_table_growth(need, growths);
  allocate_growths(growths, stream);
  install_growths(growths, stream);

  const uint64_t sz = dtype_size(a.src_dtype), D = cfg_.head_dim, H = layers_[l].heads;
  StatefulAppendWork w;
  w.kv = row_layer(l);
  w.src_dtype = a.src_dtype;
  w.key = a.key;
  w.value = cfg_.kv_factor == 2 ? a.value : a.key;
  w.num_tokens = a.num_tokens;
  w.src_row_stride = H * a.num_tokens * D * sz;
  if (layout_ == KVC_LAYOUT_HND) {
    w.src_head_stride = uint64_t(a.num_tokens) * D * sz;
    w.src_token_stride = D * sz;
  } else {
    w.src_head_stride = D * sz;
    w.src_token_stride = H * D * sz;
  }
  w.k_scale = a.k_scale;
  w.v_scale = a.v_scale;
  w.positions = pos.data();
  w.counts = cnt.data();
  w.lengths = lengths_dev_ + uint64_t(l) * B_;
  w.table = book_.active() ? table_ : nullptr;
  w.table_stride = table_cap_;
  dev_->stateful_append(w, stream);
  for (uint32_t r = 0; r < B_; ++r) {
    len(l, r) = pos[r] + cnt[r];
    if (cnt[r] > 0) book_.on_append(r, pos[r] + cnt[r]);
  }
}

// ---------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------

kvc_stateful_view_t StatefulCache::view(uint32_t layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  check_layer(layer);
  const RowLayer r = row_layer(layer);
  kvc_stateful_view_t v{};
  v.layer = layer;
  v.key = r.base;
  v.value = r.base == nullptr || cfg_.kv_factor == 1
                ? r.base
                : static_cast<unsigned char*>(r.base) + r.kv_stride;
  v.row_stride = r.row_stride;
  v.head_stride = r.head_stride;
  v.token_stride = r.token_stride;
  v.batch = B_;
  v.capacity = r.capacity;
  v.kv_heads = r.kv_heads;
  v.head_dim = r.head_dim;
  v.dtype = cfg_.dtype;
  v.layout = layout_;
  v.max_length = max_len(layer);
  v.lengths = lengths_dev_ + uint64_t(layer) * B_;
  v.beam_table = book_.active() ? table_ : nullptr;
  v.beam_table_stride = book_.active() ? table_cap_ : 0;
  return v;
}

std::vector<uint32_t> StatefulCache::lengths(uint32_t layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  check_layer(layer);
  return std::vector<uint32_t>(len_.begin() + int64_t(uint64_t(layer) * B_),
                               len_.begin() + int64_t(uint64_t(layer + 1) * B_));
}

StatefulStats StatefulCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

StatefulLayerStats StatefulCache::layer_stats(uint32_t layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  check_layer(layer);
  const Layer& l = layers_[layer];
  StatefulLayerStats s;
  s.capacity = l.capacity;
  s.growth_offset = policy_.offset(layer);
  s.bytes = l.bytes;
  s.reallocations = l.reallocations;
  s.last_growth_length = l.last_growth_length;
  s.max_length = max_len(layer);
  return s;
}

StateGeometry StatefulCache::geometry() const {
  StateGeometry g;
  g.num_layers = L_;
  g.head_dim = cfg_.head_dim;
  g.dtype = cfg_.dtype;
  g.layout = layout_;
  g.kv_factor = cfg_.kv_factor;
  for (const Layer& l : layers_) g.kv_heads.push_back(l.heads);
  return g;
}

AsyncError StatefulCache::async_error(void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  return dev_->async_error(stream);
}

}  // namespace kvc
