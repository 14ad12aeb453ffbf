// The fuzzed program: up to kMaxCalls operations decoded from the input,
// each one or a few calls of the public API on one of the caches, with the
// statuses the header allows for its arguments and the shadow updated on
// success (fuzz_model.h checks the rest).
#pragma once

#include <memory>
#include <vector>

#include "fuzz_input.h"
#include "fuzz_model.h"

namespace kvc_fuzz {

constexpr int kMaxCalls = 300;

class Program {
 public:
  Program(Input& in, std::vector<std::unique_ptr<CacheModel>>& caches) : in_(in), caches_(caches) {}
  void run();
  // Removes every sequence and pin; the cache must end with nothing in use
  // and, after kvc_cache_reset_reuse, every block free.
  // `orphan`: an export of this cache left open (the cache is destroyed
  // with it); its blocks stay in use.
  static void drain(CacheModel& c, const ExportModel* orphan = nullptr);
  // The end of the program's transfers (fuzz_export.cpp, fuzz_import.cpp): every export
  // released but, sometimes, one left open to outlive its cache (returned,
  // with the index of its cache, for release after the caches are gone);
  // every receiver drained and destroyed.
  ExportModel finish_transfers(size_t* orphan_cache);
  // After the caches were destroyed: the orphan's handle still describes
  // the export, then is released.
  static void release_orphan(ExportModel& e);

 private:
  CacheModel& c() { return *caches_[cur_]; }
  uint64_t read_id();
  uint64_t live_id();
  const SeqModel* find(uint64_t id) { auto it = c().seqs.find(id); return it == c().seqs.end() ? nullptr : &it->second; }
  int32_t small_token();
  std::vector<int32_t> prompt();
  std::vector<uint64_t> batch_ids(bool* unknown, bool* repeated);

  void add(bool and_commit);
  void after_commit(uint64_t id, uint64_t n) { after_commit(c(), id, n); }
  static void after_commit(CacheModel& m, uint64_t id, uint64_t n);
  void extend();
  void batch_extend();
  void commit();
  void rewind();
  void fork();
  void remove();
  void pin();
  void unpin();
  void probe();
  void blocks_needed();
  void block_table();
  void block_table_csr();
  void lengths();
  void slot_mapping();
  void stats();
  void describe_sequence();
  void block_ids();
  void describe_cache();
  void reset_reuse();  // these three: fuzz_cache_ops.cpp
  void resize();
  void make_room();
  void advance_clock(uint8_t f);
  void flush_tiers();      // the disk configuration: kvc_cache_flush_tiers (fuzz_disk.cpp)
  void after_call_disk();  // the disk configuration: pending-write feedback, the writer paused again
  void kernels();
  // Block transfer (fuzz_export.cpp, fuzz_import.cpp).
  void transfer(uint8_t f);
  void export_sequence();
  void release_export();
  void query_export();
  void import_blocks();
  CacheModel& receiver();
  void check_export_queries(CacheModel& m, ExportModel& e, uint64_t keys_bytes);

  Input& in_;
  std::vector<std::unique_ptr<CacheModel>>& caches_;
  size_t cur_ = 0;
  // Prompts added lately and the tokens of removed sequences: adds that
  // come back to them (in another scope, after evictions) are where reuse
  // can go wrong.
  std::vector<std::vector<int32_t>> recent_;
  size_t recent_next_ = 0;
  // The disk configuration's drain operation (fuzz_disk.cpp): the prompt
  // the next add takes instead of decoding one (the committed tokens of the
  // sequence that had the most, and a token), and its options.
  std::vector<int32_t> forced_prompt_;
  std::shared_ptr<const Options> forced_opts_;  // and its options
  void drain_and_reload();
  void remember(const std::vector<int32_t>& tokens);
};

}  // namespace kvc_fuzz
