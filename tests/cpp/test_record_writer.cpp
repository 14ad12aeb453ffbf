// The record writer's ring (store/record_writer.h): jobs finish in the
// order they were submitted, across the ring's wrap, each job's key landing
// in the key table at its ticket; a slot is free again only once released
// (room()); a full ring refuses jobs and counts them; a paused writer takes
// none; a job chained on an earlier job's ticket gets the key the chain
// gives, one chained on an unknown ticket a zero key. flush() replaces any
// waiting: no sleeps, no timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/block_record.h"
#include "core/portable_hash.h"
#include "store/record_writer.h"

namespace kvc {
namespace {

constexpr uint32_t kT = 2;
constexpr uint64_t kPayload = 8;
constexpr uint64_t kSeed = 7;

RecordLayout layout() {
  RecordLayout l;
  l.fingerprint = 0x1234;
  l.tokens_per_block = kT;
  l.payload_bytes = kPayload;
  return l;
}

// Remembers every put: its hash and its payload's first byte.
class Recorder final : public BlockStore {
 public:
  const char* name() const override { return "recorder"; }
  const RecordLayout& layout() const override { return layout_; }
  bool put(uint64_t hash, uint32_t, const unsigned char* record) override {
    hashes.push_back(hash);
    first_bytes.push_back(record[layout_.header_bytes()]);
    return true;
  }
  size_t load(const uint64_t*, size_t, unsigned char* const*) override { return 0; }
  void reject(uint64_t, RecordCheck) override {}
  void flush() override {}
  StoreStats stats() const override { return {}; }

  std::vector<uint64_t> hashes;
  std::vector<unsigned char> first_bytes;

 private:
  const RecordLayout layout_ = kvc::layout();
};

// Job i: ticket 100 + i, tokens {i, i + 1}, payload bytes all equal to i.
struct Jobs {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<unsigned char>> payloads;
  std::vector<const unsigned char*> parts;
  std::vector<RecordWrite> writes;

  explicit Jobs(size_t n, size_t first = 0) : tokens(n), payloads(n), parts(n) {
    for (size_t i = 0; i < n; ++i) {
      const int32_t v = int32_t(first + i);
      tokens[i] = {v, v + 1};
      payloads[i].assign(kPayload, static_cast<unsigned char>(v));
      parts[i] = payloads[i].data();
    }
    for (size_t i = 0; i < n; ++i) {
      RecordWrite w;
      w.ticket = 100 + first + i;
      w.priority = 35;
      w.tokens = tokens[i].data();
      w.parts = &parts[i];
      writes.push_back(w);
    }
  }
};

uint64_t root_hash(const std::vector<int32_t>& t) {
  return PortableHasher(kSeed).block(0, 0, 0, t.data(), kT);
}

// A finished job as the core sees it: its ticket and the key the writer
// stored at it.
struct WriteDone {
  uint64_t ticket = 0;
  bool keyed = false;
  StoreKey key;
};

// The core's side, as StoreChain keeps it: the key table the writer stores
// keys in (tickets below kTable), the tickets of the accepted jobs in
// submission order, and how many of them were taken back (seen finished,
// their keys read, their places released).
constexpr size_t kTable = 4096;
struct Core {
  explicit Core(std::vector<BlockStore*> stores, size_t max_jobs, const RecordLayout& l = layout(),
                std::vector<uint64_t> parts = {kPayload})
      : table(kTable),
        w(l, std::move(parts), std::move(stores), max_jobs, kSeed, table.data(), kTable) {}
  size_t submit(const RecordWrite* jobs, size_t n) {
    const size_t took = w.submit(jobs, n);
    for (size_t i = 0; i < took; ++i) accepted.push_back(jobs[i].ticket);
    return took;
  }
  // `tickets`: the run's blocks' (a run of node records names its last
  // node only).
  size_t submit_run(const RecordRun& run, const uint64_t* tickets = nullptr) {
    const size_t took = w.submit_run(run);
    if (tickets == nullptr) tickets = run.tickets;
    for (size_t i = 0; i < took; ++i) accepted.push_back(tickets[i]);
    return took;
  }
  // Appends the jobs finished since the last call and frees their places.
  void take_done(std::vector<WriteDone>& done) {
    const uint64_t finished = w.finished();
    for (; taken < finished; ++taken) {
      WriteDone d;
      d.ticket = accepted[taken];
      d.key = table[d.ticket];
      d.keyed = keyed(d.key);
      done.push_back(d);
    }
    w.release(finished);
  }
  std::vector<StoreKey> table;  // before w: it outlives the writer
  ThreadedRecordWriter w;
  std::vector<uint64_t> accepted;
  uint64_t taken = 0;
};

TEST(RecordWriter, JobsFinishInSubmissionOrderAcrossTheRingsWrapKeysAtTheirTickets) {
  Recorder store;
  Core c({&store}, 4);
  ThreadedRecordWriter& w = c.w;
  std::vector<uint64_t> tickets;
  for (size_t round = 0; round < 5; ++round) {  // 15 jobs through a ring of 4
    Jobs jobs(3, round * 3);
    EXPECT_EQ(w.room(), 4u);
    EXPECT_EQ(c.submit(jobs.writes.data(), 3), 3u);
    w.flush();
    std::vector<WriteDone> done;
    c.take_done(done);
    ASSERT_EQ(done.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(done[i].ticket, 100 + round * 3 + i);
      EXPECT_TRUE(done[i].keyed);
      EXPECT_EQ(done[i].key.hash, root_hash(jobs.tokens[i]));
      tickets.push_back(done[i].ticket);
    }
  }
  ASSERT_EQ(store.hashes.size(), 15u);
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(store.first_bytes[i], i);  // written in order
  EXPECT_EQ(w.dropped(), 0u);
  EXPECT_EQ(w.accepted(0), 15u);
  EXPECT_EQ(w.queued(), 0u);
}

// Takes every record's buffer (put_buffer) and keeps it; put() is never
// expected.
class Taker final : public BlockStore {
 public:
  const char* name() const override { return "taker"; }
  const RecordLayout& layout() const override { return layout_; }
  bool put(uint64_t, uint32_t, const unsigned char*) override {
    ++copies;
    return true;
  }
  bool put_buffer(uint64_t hash, uint32_t, std::unique_ptr<unsigned char[]>& record) override {
    hashes.push_back(hash);
    taken.push_back(std::move(record));
    record.reset(new unsigned char[layout_.record_bytes()]);
    return true;
  }
  size_t load(const uint64_t*, size_t, unsigned char* const*) override { return 0; }
  void reject(uint64_t, RecordCheck) override {}
  void flush() override {}
  StoreStats stats() const override { return {}; }

  std::vector<uint64_t> hashes;
  std::vector<std::unique_ptr<unsigned char[]>> taken;
  int copies = 0;

 private:
  const RecordLayout layout_ = kvc::layout();
};

// The first store of the chain is handed the sealed record's buffer itself
// (no copy); the others get copies of the same bytes.
TEST(RecordWriter, TheFirstStoreTakesTheRecordsBufferTheOthersCopy) {
  Taker first;
  Recorder second;
  Core c({&first, &second}, 8);
  ThreadedRecordWriter& w = c.w;
  Jobs jobs(3);
  EXPECT_EQ(w.submit(jobs.writes.data(), 3), 3u);
  w.flush();
  ASSERT_EQ(first.taken.size(), 3u);
  EXPECT_EQ(first.copies, 0);
  EXPECT_EQ(first.hashes, second.hashes);
  const RecordLayout l = layout();
  for (size_t i = 0; i < 3; ++i) {
    const unsigned char* r = first.taken[i].get();
    EXPECT_EQ(r[l.header_bytes()], static_cast<unsigned char>(i));  // its own payload
    EXPECT_EQ(second.first_bytes[i], static_cast<unsigned char>(i));
    RecordKey k;
    k.lookup_hash = root_hash(jobs.tokens[i]);
    k.digest = block_chain_digest(ChainDigest{}, ChainDigest{}, ChainDigest{},
                                  jobs.tokens[i].data(), kT);
    k.tokens = jobs.tokens[i].data();
    EXPECT_EQ(check_record(l, k, r, l.record_bytes()), RecordCheck::kOk);
  }
  EXPECT_NE(first.taken[0].get(), first.taken[1].get());
  EXPECT_EQ(w.accepted(0), 3u);
  EXPECT_EQ(w.accepted(1), 3u);
}

TEST(RecordWriter, ASlotIsFreeOnlyOnceItsJobWasReleased) {
  Recorder store;
  Core c({&store}, 4);
  ThreadedRecordWriter& w = c.w;
  Jobs jobs(6);
  EXPECT_EQ(c.submit(jobs.writes.data(), 4), 4u);
  w.flush();
  EXPECT_EQ(w.queued(), 0u);
  EXPECT_EQ(w.finished(), 4u);
  EXPECT_EQ(w.room(), 0u);  // written, not released: still in the ring
  EXPECT_EQ(c.submit(jobs.writes.data() + 4, 2), 0u);
  EXPECT_EQ(w.dropped(), 2u);
  w.count_dropped(3);  // jobs a commit did not build for want of room
  EXPECT_EQ(w.dropped(), 5u);
  w.release(1);  // places are freed in order
  EXPECT_EQ(w.room(), 1u);
  std::vector<WriteDone> done;
  c.take_done(done);
  EXPECT_EQ(done.size(), 4u);
  EXPECT_EQ(w.room(), 4u);
  c.take_done(done);  // nothing new
  EXPECT_EQ(done.size(), 4u);
  w.release(2);  // an older count frees nothing more, takes nothing back
  EXPECT_EQ(w.room(), 4u);
  EXPECT_EQ(c.submit(jobs.writes.data() + 4, 2), 2u);
  w.flush();
  c.take_done(done);
  ASSERT_EQ(done.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(done[i].ticket, 100 + i);
}

TEST(RecordWriter, APausedWriterTakesNoJobUntilResumed) {
  Recorder store;
  Core c({&store}, 16);
  ThreadedRecordWriter& w = c.w;
  w.set_paused(true);
  Jobs jobs(2);  // below half the ring: the submit does not wake the worker
  EXPECT_EQ(c.submit(jobs.writes.data(), 2), 2u);
  std::vector<WriteDone> done;
  c.take_done(done);
  EXPECT_TRUE(done.empty());
  EXPECT_EQ(w.queued(), 2u);
  EXPECT_TRUE(store.hashes.empty());
  w.set_paused(false);
  w.flush();
  c.take_done(done);
  EXPECT_EQ(done.size(), 2u);
  EXPECT_EQ(store.hashes.size(), 2u);
}

TEST(RecordWriter, AJobChainedOnAnEarlierTicketGetsThatJobsKeyAsParent) {
  Recorder store;
  Core c({&store}, 4);
  Jobs jobs(2);
  jobs.writes[1].parent_ticket = jobs.writes[0].ticket;
  EXPECT_EQ(c.submit(jobs.writes.data(), 2), 2u);
  c.w.flush();
  std::vector<WriteDone> done;
  c.take_done(done);
  ASSERT_EQ(done.size(), 2u);
  const PortableHasher h(kSeed);
  EXPECT_EQ(done[1].key.hash, h.block(done[0].key.hash, 0, 0, jobs.tokens[1].data(), kT));
}

// A job chained on a ticket the writer does not know (never submitted, or
// forgotten) is not keyed: nothing is written, its table entry is all zero
// (whatever it held before) and it counts as dropped.
TEST(RecordWriter, AJobChainedOnAnUnknownTicketGetsAZeroKeyAndIsDropped) {
  Recorder store;
  Core c({&store}, 4);
  Jobs jobs(1);
  jobs.writes[0].parent_ticket = 999;  // no such job
  c.table[jobs.writes[0].ticket].hash = 77;
  c.table[jobs.writes[0].ticket].digest.bytes[3] = 1;
  EXPECT_EQ(c.submit(jobs.writes.data(), 1), 1u);
  c.w.flush();
  std::vector<WriteDone> done;
  c.take_done(done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].keyed);
  EXPECT_EQ(done[0].key.hash, 0u);
  EXPECT_TRUE(store.hashes.empty());
  EXPECT_EQ(c.w.dropped(), 1u);
  EXPECT_EQ(c.w.accepted(0), 0u);
}

// Submits and releases racing the worker (no flush between them), as
// commits do, and nudges as between steps: every accepted job finishes
// exactly once, in submission order, with its key at its ticket, and every
// refused one is counted (the ThreadSanitizer build checks the ring, the
// key table and the worker's wake-up).
TEST(RecordWriter, JobsRacingTheWorkerFinishOnceInOrder) {
  Recorder store;
  Jobs jobs(3000);
  Core c({&store}, 8);
  ThreadedRecordWriter& w = c.w;
  std::vector<WriteDone> done;
  std::vector<uint64_t> accepted;
  uint64_t refused = 0;
  for (size_t i = 0; i < jobs.writes.size();) {
    const size_t n = std::min<size_t>(1 + i % 3, jobs.writes.size() - i);
    const size_t took = c.submit(jobs.writes.data() + i, n);
    for (size_t k = 0; k < took; ++k) accepted.push_back(jobs.writes[i + k].ticket);
    refused += n - took;
    i += n;
    if (i % 5 == 0) w.nudge();
    c.take_done(done);
  }
  w.flush();
  c.take_done(done);
  ASSERT_EQ(done.size(), accepted.size());
  for (size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(done[i].ticket, accepted[i]);
    EXPECT_EQ(done[i].key.hash, root_hash(jobs.tokens[done[i].ticket - 100]));
  }
  EXPECT_EQ(w.dropped(), refused);
  EXPECT_EQ(w.accepted(0), accepted.size());
  EXPECT_EQ(store.hashes.size(), accepted.size());
  EXPECT_EQ(w.room(), 8u);
}

// A ticket outside the key table is the caller's bug: refused with
// KVC_ERR_INTERNAL before anything changes (the jobs before it in the same
// call included), and the writer goes on.
TEST(RecordWriter, ATicketOutsideTheKeyTableIsRefusedAndChangesNothing) {
  Recorder store;
  Core c({&store}, 4);
  Jobs jobs(2);
  jobs.writes[1].ticket = kTable;  // one past the table
  try {
    c.w.submit(jobs.writes.data(), 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), KVC_ERR_INTERNAL);
    EXPECT_NE(std::string(e.what()).find("outside the key table"), std::string::npos) << e.what();
  }
  const uint64_t last = kTable + 7;
  RecordRun run;
  run.count = 1;
  run.tickets = &last;
  const uint32_t priority = 1;
  run.priorities = &priority;
  run.tokens = jobs.tokens[0].data();
  run.parts = &jobs.parts[0];
  EXPECT_THROW(c.w.submit_run(run), Error);
  EXPECT_EQ(c.w.room(), 4u);
  EXPECT_EQ(c.w.dropped(), 0u);
  EXPECT_EQ(c.submit(jobs.writes.data(), 1), 1u);
  c.w.flush();
  std::vector<WriteDone> done;
  c.take_done(done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].key.hash, root_hash(jobs.tokens[0]));
}

TEST(RecordWriter, TheDestructorFinishesJobsTheWorkerWasNotWokenFor) {
  Recorder store;
  Jobs jobs(1);  // the blocks outlive the writer, as the core's do
  {
    Core c({&store}, 16);
    EXPECT_EQ(c.submit(jobs.writes.data(), 1), 1u);
  }
  EXPECT_EQ(store.hashes.size(), 1u);
}

// A run (submit_run): one job per block, block i chaining on block i - 1,
// the first on the run's parent or on the job its parent_ticket names; a
// run longer than the room is cut (its prefix taken, the rest counted
// dropped), its blocks wrap round the ring.
TEST(RecordWriter, ARunChainsItsBlocksAndIsCutAtTheRoom) {
  Recorder store;
  Core c({&store}, 4);
  ThreadedRecordWriter& w = c.w;
  Jobs one(1, 50);  // moves the ring's tail to 1: the run wraps
  ASSERT_EQ(c.submit(one.writes.data(), 1), 1u);
  w.flush();
  std::vector<WriteDone> done;
  c.take_done(done);
  ASSERT_EQ(done.size(), 1u);

  Jobs blocks(5);  // tokens {i, i + 1}, payload bytes i
  std::vector<uint64_t> tickets;
  std::vector<uint32_t> priorities;
  std::vector<int32_t> tokens;
  std::vector<const unsigned char*> parts;
  for (size_t i = 0; i < 5; ++i) {
    tickets.push_back(200 + i);
    priorities.push_back(uint32_t(10 + i));
    tokens.insert(tokens.end(), blocks.tokens[i].begin(), blocks.tokens[i].end());
    parts.push_back(blocks.parts[i]);
  }
  RecordRun run;
  run.parent = done[0].key;  // chains on the job before
  run.count = 5;
  run.tickets = tickets.data();
  run.priorities = priorities.data();
  run.tokens = tokens.data();
  run.parts = parts.data();
  EXPECT_EQ(c.submit_run(run), 4u);  // the ring holds 4
  EXPECT_EQ(w.dropped(), 1u);
  EXPECT_EQ(w.room(), 0u);
  w.flush();
  done.clear();
  c.take_done(done);
  ASSERT_EQ(done.size(), 4u);
  EXPECT_EQ(w.room(), 4u);
  const PortableHasher h(kSeed);
  uint64_t parent = root_hash(one.tokens[0]);
  ChainDigest parent_digest = block_chain_digest(ChainDigest{}, ChainDigest{}, ChainDigest{},
                                                 one.tokens[0].data(), kT);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(done[i].ticket, 200 + i);
    ASSERT_TRUE(done[i].keyed);
    const uint64_t want = h.block(parent, 0, 0, blocks.tokens[i].data(), kT);
    EXPECT_EQ(done[i].key.hash, want) << i;
    EXPECT_EQ(done[i].key.digest, block_chain_digest(parent_digest, ChainDigest{}, ChainDigest{},
                                                     blocks.tokens[i].data(), kT))
        << i;
    parent_digest = done[i].key.digest;
    parent = want;
  }
  ASSERT_EQ(store.hashes.size(), 5u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(store.hashes[1 + i], done[i].key.hash);
    EXPECT_EQ(store.first_bytes[1 + i], i);  // each block's own payload
  }

  // A second run chains on a job of the first by its ticket.
  Jobs more(2, 7);
  std::vector<int32_t> more_tokens = more.tokens[0];
  more_tokens.insert(more_tokens.end(), more.tokens[1].begin(), more.tokens[1].end());
  const uint64_t more_tickets[2] = {300, 301};
  const uint32_t more_priorities[2] = {1, 2};
  RecordRun next;
  next.parent_ticket = 203;
  next.count = 2;
  next.tickets = more_tickets;
  next.priorities = more_priorities;
  next.tokens = more_tokens.data();
  next.parts = more.parts.data();
  EXPECT_EQ(c.submit_run(next), 2u);
  w.flush();
  done.clear();
  c.take_done(done);
  ASSERT_EQ(done.size(), 2u);
  const uint64_t k0 = h.block(parent, 0, 0, more.tokens[0].data(), kT);
  EXPECT_EQ(done[0].key.hash, k0);
  EXPECT_EQ(done[1].key.hash, h.block(k0, 0, 0, more.tokens[1].data(), kT));
  EXPECT_EQ(w.dropped(), 1u);
}

// A run whose blocks the writer reads from node records (RecordRun::nodes):
// the serving side hands it the last node's id only; the writer finds the
// run's nodes up the parent words of the records, each block's tokens in
// its node's record and its bytes through the record's block ids and the
// pools' bases. Its records and keys are bit for bit those of the same run
// handed over as copies (tickets, tokens and addresses), two groups, across
// the ring's wrap and the run headers' reuse; a run cut at the room keeps
// its first blocks.
class Keeper final : public BlockStore {
 public:
  explicit Keeper(const RecordLayout& l) : layout_(l) {}
  const char* name() const override { return "keeper"; }
  const RecordLayout& layout() const override { return layout_; }
  bool put(uint64_t, uint32_t, const unsigned char* record) override {
    records.emplace_back(record, record + layout_.record_bytes());
    return true;
  }
  size_t load(const uint64_t*, size_t, unsigned char* const*) override { return 0; }
  void reject(uint64_t, RecordCheck) override {}
  void flush() override {}
  StoreStats stats() const override { return {}; }
  std::vector<std::vector<unsigned char>> records;

 private:
  const RecordLayout layout_;
};

TEST(RecordWriter, ARunReadFromNodeRecordsWritesTheSameRecordsAsItsCopies) {
  constexpr uint64_t kA = 8, kB = 4;  // two groups' block bytes
  RecordLayout l = layout();
  l.payload_bytes = kA + kB;
  // Pools: 8 blocks each, block b's bytes b * 16 + k (group A), 200 - b - k (B).
  std::vector<unsigned char> pool_a(8 * kA), pool_b(8 * kB);
  for (size_t i = 0; i < pool_a.size(); ++i) pool_a[i] = static_cast<unsigned char>((i / kA) * 16 + i % kA);
  for (size_t i = 0; i < pool_b.size(); ++i) pool_b[i] = static_cast<unsigned char>(200 - i / kB - i % kB);
  // Node records, 8 words each: tokens (kT), the parent's id at word 2,
  // the block ids at word 4.
  constexpr uint32_t kStride = 8, kParentAt = 2, kBlocksAt = 4;
  std::vector<uint32_t> records(16 * kStride, 0xdeadbeef);
  const uint64_t nodes[6] = {3, 9, 4, 12, 1, 7};  // one chain, two runs: 3 and 3 blocks
  const uint32_t blocks_a[6] = {5, 0, 7, 2, 6, 1}, blocks_b[6] = {1, 3, 0, 6, 2, 4};
  std::vector<int32_t> tokens;                 // the copies' side
  std::vector<const unsigned char*> parts;
  for (size_t i = 0; i < 6; ++i) {
    uint32_t* r = &records[nodes[i] * kStride];
    r[0] = uint32_t(1000 + 3 * i);
    r[1] = uint32_t(7 * i);
    r[kParentAt] = i == 0 ? 15 : uint32_t(nodes[i - 1]);  // node 15: not written
    r[kBlocksAt] = blocks_a[i];
    r[kBlocksAt + 1] = blocks_b[i];
    tokens.push_back(int32_t(r[0]));
    tokens.push_back(int32_t(r[1]));
    parts.push_back(pool_a.data() + blocks_a[i] * kA);
    parts.push_back(pool_b.data() + blocks_b[i] * kB);
  }
  const unsigned char* bases[2] = {pool_a.data(), pool_b.data()};
  NodeRecords source;
  source.records = records.data();
  source.stride = kStride;
  source.parent_at = kParentAt;
  source.blocks_at = kBlocksAt;
  source.bases = bases;
  const uint32_t priorities[6] = {5, 5, 5, 6, 6, 6};  // one per run

  std::vector<WriteDone> keys[2];  // copies, records
  auto write_all = [&](bool from_records) {
    Keeper store(l);
    std::vector<WriteDone>& done = keys[from_records];
    {
      Core c({&store}, 4, l, {kA, kB});
      for (size_t k = 0; k < 2; ++k) {  // the second run wraps the ring of 4
        RecordRun run;
        run.count = 3;
        run.tickets = nodes + 3 * k;
        run.priorities = priorities + 3 * k;
        if (k == 1) run.parent_ticket = nodes[2];  // chains on the first run's last job
        if (from_records) {
          run.nodes = &source;
          run.last = uint32_t(nodes[3 * k + 2]);
          run.priority = priorities[3 * k];
          run.tickets = nullptr;
          run.priorities = nullptr;
        } else {
          run.tokens = tokens.data() + 3 * k * kT;
          run.parts = parts.data() + 3 * k * 2;
        }
        EXPECT_EQ(c.submit_run(run, nodes + 3 * k), 3u);
        c.w.flush();
        c.take_done(done);
      }
    }
    EXPECT_EQ(done.size(), 6u);
    for (size_t i = 0; i < done.size(); ++i) {
      EXPECT_EQ(done[i].ticket, nodes[i]);
      EXPECT_TRUE(done[i].keyed);
    }
    return store.records;
  };
  const auto copied = write_all(false);
  const auto read = write_all(true);
  ASSERT_EQ(copied.size(), 6u);
  ASSERT_EQ(read.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(read[i], copied[i]) << "record " << i;
    EXPECT_EQ(keys[1][i].key.hash, keys[0][i].key.hash) << i;
    EXPECT_EQ(keys[1][i].key.digest, keys[0][i].key.digest) << i;
    // The payload is the two pool blocks', bit for bit.
    const unsigned char* payload = read[i].data() + l.header_bytes();
    EXPECT_EQ(std::memcmp(payload, pool_a.data() + blocks_a[i] * kA, kA), 0) << i;
    EXPECT_EQ(std::memcmp(payload + kA, pool_b.data() + blocks_b[i] * kB, kB), 0) << i;
  }

  // The first run again into a ring of 2: its first two blocks are taken
  // (the same records and keys), the last one dropped.
  Keeper store(l);
  std::vector<WriteDone> done;
  {
    Core c({&store}, 2, l, {kA, kB});
    RecordRun run;
    run.count = 3;
    run.nodes = &source;
    run.last = uint32_t(nodes[2]);
    run.priority = priorities[0];
    EXPECT_EQ(c.submit_run(run, nodes), 2u);
    EXPECT_EQ(c.w.dropped(), 1u);
    c.w.flush();
    c.take_done(done);
  }
  ASSERT_EQ(done.size(), 2u);
  ASSERT_EQ(store.records.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(done[i].key.digest, keys[0][i].key.digest) << i;
    EXPECT_EQ(store.records[i], copied[i]) << i;
  }
}

}  // namespace
}  // namespace kvc
