// The state configuration's program (fuzz_state.cpp: the cache, the mirror
// and the checks; fuzz_state_ops.cpp: the operations the input picks).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include <kvcache/kvcache.h>

#include "fuzz_input.h"
#include "fuzz_model.h"

namespace kvc_fuzz {
namespace state_program {

constexpr uint32_t T = 4;            // tokens per block
constexpr uint32_t kMaxIds = 6;      // sequence ids 0..5
constexpr uint32_t kMaxPrompt = 20;  // tokens of a prompt

using Bytes = std::vector<unsigned char>;
using Tokens = std::vector<int32_t>;

inline void must(kvc_status_t st, const char* what) {
  ++g_count.check_calls;
  if (st != KVC_OK) finding("%s failed: %s: %s", what, kvc_status_string(st), kvc_last_error_message());
}

struct Seq {
  bool live = false;
  Tokens tokens;
  uint64_t committed = 0;
  std::vector<int32_t> slot;  // per resource
};

class StateProgram {
 public:
  explicit StateProgram(Input& in) : in_(in) {}
  ~StateProgram() {
    if (cache_ != nullptr) kvc_cache_destroy(cache_);
  }
  void run();

 private:
  // --- setup ------------------------------------------------------------
  bool create();
  // --- mirror -----------------------------------------------------------
  unsigned char* slot_ptr(uint32_t r, int32_t slot) const {
    return static_cast<unsigned char*>(res_[r].base) + uint64_t(slot) * res_[r].slot_stride;
  }
  Bytes read_slot(uint32_t r, int32_t slot) const {
    const unsigned char* p = slot_ptr(r, slot);
    return Bytes(p, p + res_[r].slot_bytes);
  }
  std::vector<Bytes> state_of(const Seq& s) const {
    std::vector<Bytes> v;
    for (uint32_t r = 0; r < nres_; ++r) v.push_back(read_slot(r, s.slot[r]));
    return v;
  }
  void set_state(const Seq& s, const std::vector<Bytes>& v) {
    for (uint32_t r = 0; r < nres_; ++r) {
      mirror_[r][s.slot[r]] = v[r];
      known_[r][s.slot[r]] = true;
    }
  }
  void learn_slots(uint64_t id);
  void verify(const char* what);
  kvc_snapshot_stats_t stats() const;
  void after(const char* what, kvc_status_t st, std::initializer_list<kvc_status_t> allowed);
  void unchanged(const char* what, const kvc_snapshot_stats_t& before);
  // --- operations -------------------------------------------------------
  Tokens prompt();
  uint64_t pick_id() { return in_.below(kMaxIds); }
  int live_count() const;
  void add();
  void write_state() { write_state(pick_id()); }
  void write_state(uint64_t id);
  void commit();
  void publish();
  void extend();
  void rewind();
  void fork();
  void remove();
  void reset_reuse();
  void bad_input();

  Input& in_;
  kvc_cache_t* cache_ = nullptr;
  uint32_t nres_ = 0, slots_ = 0, snapshots_ = 0, host_snapshots_ = 0;
  std::vector<kvc_resource_desc_t> res_;
  std::vector<std::vector<Bytes>> mirror_;  // [resource][slot]
  std::vector<std::vector<bool>> known_;
  Seq seqs_[kMaxIds];
  std::map<Tokens, std::vector<Bytes>> published_;  // prefix -> bytes of its last publish
  std::vector<Tokens> history_;                     // prompts seen, to build shared prefixes
  uint32_t nonce_ = 0;
};

}  // namespace state_program
}  // namespace kvc_fuzz
