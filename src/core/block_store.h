// A block store: a tier below the tree-resident ones (primary, host) that
// the radix tree does not index. Its blocks outlive the process (disk) or
// are shared by many processes (a remote store such as Redis), so they are
// addressed by key, not by tree node: a block that leaves the lowest
// tree-resident tier with enough priority is put into the first store of
// the chain; a prompt's blocks that the tree does not have are looked up in
// the stores in order (disk, then remote), and hits are loaded into fresh
// primary blocks and published in the tree before kvc_sequence_add returns.
//
// The core holds a store through this interface and does no I/O itself
// (ARCHITECTURE.md, Layers): implementations live in src/store/ (disk_store.h,
// and a Redis store) with their own worker threads. The core calls a store
// from one thread at a time (under the cache's lock); a store synchronizes
// with its own workers.
//
// What moves are whole records (block_record.h): header + payload, every
// record of a cache the same size (layout().record_bytes()). A store moves
// them as opaque bytes; the core seals them before put() and checks each one
// load() returns (check_record: format, geometry, checksum, full key) before
// it becomes KV, and tells the store about a record that failed (reject()).
// A store therefore cannot hand out wrong KV: a lookup-hash collision, a torn
// or corrupted file, a foreign value all end as misses, counted.
//
// Rules an implementation keeps:
//  - put() never waits on I/O: it copies the record into the store's own
//    bounded queue (put_buffer(): takes the caller's buffer instead, where
//    the store can), or drops it (counted in drops) when the queue is full
//    or the store is down. The serving call goes on either way.
//  - load() is synchronous and time bounded (a remote store's timeout): it
//    answers the leading run of hashes it has, one round trip per chunk for
//    a remote store (pipelined), not per block. A failure or a timeout ends
//    the run early and counts an error; it never throws: to the serving
//    call a failed lookup is a miss.
//  - A record put is found by later loads once flush() has returned (it may
//    be found earlier). Records of a store are replaced by a later put under
//    the same hash.
//  - flush() waits until every put queued before it is written or dropped:
//    tests use it instead of sleeping, and the destructor drains the same way
//    (a clean shutdown loses no accepted put).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/block_record.h"

namespace kvc {

// The stores a cache's config names (CacheConfig::stores), in chain order.
// Each tier keeps its settings in its own members; an empty one is off.
struct StoreSettings {
  // Disk tier (src/store/disk_store.h): an existing writable directory and
  // its byte budget; both set or both unset.
  std::string disk_dir;
  uint64_t disk_bytes = 0;
  // Remote tier (src/store/redis_store.h): a redis:// URL, the key namespace,
  // the byte budget of this cache's records, the timeouts and whether a
  // server that cannot be reached at create is refused (false) or connected
  // to later (true). On when the URL is set.
  std::string remote_url;
  std::string remote_namespace = "kvc";
  uint64_t remote_bytes = 0;
  uint32_t remote_connect_timeout_ms = 1000;
  uint32_t remote_command_timeout_ms = 1000;
  bool remote_optional = false;

  bool any() const { return !disk_dir.empty() || !remote_url.empty(); }
};

// Percentiles of one operation's latency, microseconds, over a store's recent
// operations (0 when none).
struct LatencySummary {
  uint64_t count = 0;  // operations measured since creation
  uint64_t p50_us = 0;
  uint64_t p99_us = 0;
  uint64_t max_us = 0;
};

struct StoreStats {
  uint64_t blocks = 0;          // records held now (a remote store: those it knows of, or 0)
  uint64_t bytes = 0;           // bytes those records take
  uint64_t capacity_bytes = 0;  // the store's byte budget (0: none of its own)
  uint64_t hits = 0;            // lookups answered with a record (before the core's check)
  uint64_t misses = 0;          // lookups of a hash the store does not hold
  uint64_t rejected = 0;        // records the core refused (reject(): torn, foreign, ...)
  uint64_t stores = 0;          // puts written
  uint64_t drops = 0;           // puts dropped: queue full, no room, write failed, store down
  uint64_t errors = 0;          // I/O failures, timeouts, protocol errors
  uint64_t evictions = 0;       // records the store removed to stay in its budget
  uint64_t queued = 0;          // puts waiting in the queue now
  LatencySummary load;          // one load() call (a chain lookup)
  LatencySummary write;         // one record written by the worker
};

// A change of what a store holds (KV events, events.h): `held` true, the
// store holds a record under `hash` now, with retention `priority` (written,
// or found at open); false, it no longer does (evicted, replaced by another
// record's slot, rejected, a failed write). A record counts as held once it
// is written (loadable from the store itself, not from its queue).
struct StoreChange {
  uint64_t hash = 0;
  uint32_t priority = 0;
  bool held = false;
};

class BlockStore {
 public:
  virtual ~BlockStore() = default;

  // --- What it holds, for KV events (optional: a store without it is never
  // named by an event) ---------------------------------------------------------
  // Starts the store's journal of changes: fills `held` with the records it
  // holds now (one change each, held true); every later change is appended
  // to the journal, in the order the store made them, until the store is
  // destroyed. Called once, by the core's thread.
  virtual void watch(std::vector<StoreChange>& held) { held.clear(); }
  // Appends the journal's changes since the last call (or watch()) to `out`
  // and empties it; cheap when there are none (one atomic load). The core's
  // thread only. A store without a journal has no changes to append.
  virtual void take_changes(std::vector<StoreChange>& /*out*/) {}

  // "disk", "remote", ...: names the tier in messages and statistics.
  virtual const char* name() const = 0;
  // The records this store holds: layout().record_bytes() bytes each.
  virtual const RecordLayout& layout() const = 0;

  // Queues a copy of `record` (sealed, layout().record_bytes() bytes) to be
  // stored under `lookup_hash` with retention `priority` (0..100, the one
  // sealed in the record; a store with an LRU of its own evicts lower
  // priorities first, older first among equals). Returns false when the put was dropped (counted). Never waits
  // on I/O.
  virtual bool put(uint64_t lookup_hash, uint32_t priority, const unsigned char* record) = 0;

  // put() without the copy where the store can queue the caller's buffer
  // itself: `record` (layout().record_bytes() bytes, sealed) is taken, and
  // `record` then holds another buffer of that size (one the store is done
  // with, or a new one; its bytes unspecified) for the caller's next record.
  // A store that cannot take it copies it as put() does and leaves `record`
  // as it was; so does a dropped put (false). Either way `record` is a
  // usable buffer afterwards. Never waits on I/O. The record writer seals
  // into such a buffer and hands it to the first store of the chain (the
  // disk): a 256 KiB record is then copied once (into the record) instead
  // of twice (bench/results/2026-11-28-disk-writes-vm-2cpu.md).
  virtual bool put_buffer(uint64_t lookup_hash, uint32_t priority,
                          std::unique_ptr<unsigned char[]>& record) {
    return put(lookup_hash, priority, record.get());
  }

  // Looks up hashes[0..n), the consecutive blocks of one prompt, and copies
  // the record of each into out[i] (record_bytes() each), stopping at the
  // first it does not hold (or cannot read in time). Returns how many
  // leading records it wrote; the records are not checked (the caller does).
  // A hit refreshes the record's recency. Never throws.
  virtual size_t load(const uint64_t* hashes, size_t n, unsigned char* const* out) = 0;

  // load(), and sums[i] = the record checksum (block_record.h:
  // RecordChecksum) of the bytes written to out[i], for each record returned,
  // for the caller's check_record_summed(). The default hashes each record
  // after load(); the disk store hashes each piece of a record right after
  // it read it, while the bytes are in the CPU's cache, so the check does not
  // read the record from memory again.
  virtual size_t load_summed(const uint64_t* hashes, size_t n, unsigned char* const* out,
                             uint64_t* sums) {
    const size_t got = load(hashes, n, out);
    for (size_t i = 0; i < got; ++i) sums[i] = record_checksum(out[i], layout().record_bytes());
    return got;
  }

  // The record under `lookup_hash` failed the caller's check (why): counted
  // in rejected; the store drops it if it still holds that record.
  virtual void reject(uint64_t lookup_hash, RecordCheck why) = 0;

  // Waits until every put queued before the call is written or dropped.
  virtual void flush() = 0;

  virtual StoreStats stats() const = 0;
};

// Opens the stores `settings` names for records of `layout`, in chain order
// (disk, then remote); defined beside the stores (src/store/open_stores.cpp)
// as create_device is beside the devices. Throws Error(KVC_ERR_INVALID_ARGUMENT)
// naming the setting that cannot be used; for the remote tier also
// KVC_ERR_DEVICE (a server that cannot be reached, not optional) and
// KVC_ERR_UNSUPPORTED (a build without hiredis).
std::vector<std::unique_ptr<BlockStore>> open_block_stores(const StoreSettings& settings,
                                                           const RecordLayout& layout);

// One block to write through to the stores (store_chain.h, write-through at
// commit): what its key is made of, the priority sealed in its record, and
// where its bytes are: parts[g] (part_bytes[g] bytes each, in group order)
// are pool blocks that nothing frees or reuses until the job is finished
// (finished(): the core waits for the job before such a block leaves the
// tree, store_chain.h). submit() copies the fields, the
// tokens and the pointers, not the bytes.
//
// The key (portable hash and SHA-256 chain digest, store_keys.h) is built
// by the writer's thread, off the serving call: it chains on `parent`, or,
// when parent_ticket is set, on the key of that earlier job (the parent's
// blocks were committed by a job the core did not see finished yet). The
// writer stores each job's key in the core's key table at the job's ticket
// (open_record_writer), where the core finds it once the job is finished.
struct RecordWrite {
  static constexpr uint64_t kNoTicket = UINT64_MAX;
  uint64_t ticket = 0;  // the core's name for the job: its key goes to key_table[ticket]
  uint64_t parent_ticket = kNoTicket;  // chain on that job's key instead of `parent`
  StoreKey parent;                     // the parent's key (zero: a prompt's first block)
  uint64_t scope_hash = 0;             // the block's scope: portable digest,
  ChainDigest scope_digest;            //   and chain digest (scope_chain_digest)
  uint64_t extra_hash = 0;             // its extra keys (both zero: none)
  ChainDigest extra_digest;
  uint32_t priority = 0;
  const int32_t* tokens = nullptr;            // layout.tokens_per_block
  const unsigned char* const* parts = nullptr;  // one per group
};

// Where the writer reads a run's blocks itself (RecordRun::nodes: the
// serving thread then hands it the run's last node id only): the tree's
// node records (radix_tree.h), node n's at records + n * stride, its tokens
// the first tokens_per_block words, its parent's id the word at parent_at,
// its group g block id the word at blocks_at + g; that block's bytes at
// bases[g] + id * part_bytes[g]. The core keeps a node's record words and
// block bytes unchanged, and the records and pools in place, until the
// node's job is finished (StoreChain::leaving before a node leaves or
// moves; settle before a resize), and writes them only before the run's
// publication.
struct NodeRecords {
  const uint32_t* records = nullptr;
  uint32_t stride = 0;     // words per node record
  uint32_t parent_at = 0;  // word offset of the parent's id in a record
  uint32_t blocks_at = 0;  // word offset of the block ids in a record
  const unsigned char* const* bases = nullptr;  // per group: its pool's block 0
};

// A run of blocks to write through (submit_run): consecutive blocks of one
// prompt with one scope and no extra keys, block i > 0 chaining on block
// i - 1, each a job of its own (its key at its ticket). The first block
// chains on `parent` or on the job parent_ticket names, as a RecordWrite
// does. Two forms:
//  - copies (nodes null): block i's ticket tickets[i], priority
//    priorities[i], tokens tokens[i * T, (i + 1) * T) and parts parts[i * G,
//    (i + 1) * G) (G = the layout's groups), copied into the ring in a few
//    memcpys;
//  - node records (nodes set): the blocks are tree nodes, the last one
//    `last`, each block's node the parent (in its record) of the next
//    block's, all at `priority`; a block's ticket is its node id. The
//    writer finds the nodes by walking the parents up from `last`, and each
//    block's tokens and bytes through its record: the serving thread writes
//    one run header and nothing per block.
struct RecordRun {
  uint64_t parent_ticket = RecordWrite::kNoTicket;
  StoreKey parent;
  uint64_t scope_hash = 0;
  ChainDigest scope_digest;
  size_t count = 0;
  // Copies:
  const uint64_t* tickets = nullptr;    // count
  const uint32_t* priorities = nullptr;  // count
  const int32_t* tokens = nullptr;       // count * tokens_per_block
  const unsigned char* const* parts = nullptr;  // count * groups
  // Node records (submit_run() copies the records' place, not what they
  // hold):
  const NodeRecords* nodes = nullptr;
  uint32_t last = 0;
  uint32_t priority = 0;
};

// The worker that turns RecordWrites into sealed records and puts them into
// every store, off the serving call (the core does no threads: it is
// defined in src/store/record_writer.cpp). Rules:
//  - submit() never waits: a full queue (max_jobs) refuses the job, counted
//    in dropped().
//  - Each accepted job is finished exactly once (written, or dropped by a
//    store), in submission order, after which the writer no longer reads
//    its parts; its key is then in the key table at its ticket.
//  - flush() waits until every job submitted before it is done (its record
//    put into the stores or dropped by them: CPU work, never the stores'
//    I/O; the caller flushes the stores for that); the destructor finishes
//    the accepted jobs first.
class RecordWriter {
 public:
  virtual ~RecordWriter() = default;
  // Takes the leading jobs[0, n) that fit in the queue, without a lock, and
  // drops the rest (counted); returns how many it took. A job whose
  // parent_ticket names a dropped job is never taken (the accepted ones are
  // a prefix, and a job chains only on earlier ones).
  virtual size_t submit(const RecordWrite* jobs, size_t n) = 0;
  // The same for a run (one block per job, one publication for the run):
  // takes its leading blocks that fit, drops the rest (counted), returns
  // how many it took. The serving thread's ring work is one header and one
  // release store per run of node records, a few copies more for a run of
  // copies.
  virtual size_t submit_run(const RecordRun& run) = 0;
  // How many jobs submit() would take now (the serving thread's own count:
  // no lock, no shared write), so that a commit builds no job the queue
  // would refuse.
  virtual size_t room() const = 0;
  // Counts n jobs the caller did not submit for want of room() as dropped.
  virtual void count_dropped(uint64_t n) = 0;
  // Frees the queue places of the first n accepted jobs (n <= finished()),
  // so that later submits may take them; a place is free again only then.
  // The serving thread's own count: no line of the worker's written.
  virtual void release(uint64_t n) = 0;
  // Wakes a worker that sleeps deeply (idle a while: one that polls finds
  // the jobs itself) while jobs are out. A submit wakes it only when the
  // queue is half used (it would read a line the worker writes), so that
  // jobs submitted otherwise wait for the worker's next poll; the core
  // calls this between steps (kvc_cache_make_room), off the serving calls.
  virtual void nudge() {}
  virtual void flush() = 0;
  // Jobs finished so far (the first n accepted jobs, in submission order;
  // one acquire load): a job numbered j (1 for the first accepted) no
  // longer reads its parts once finished() >= j, and its key is then in
  // the key table (read after this load). The core stamps each written
  // block with its job's number and checks it here before a block leaves
  // the tree (store_chain.h).
  virtual uint64_t finished() const = 0;
  // Waits until finished() >= n (n <= the jobs accepted): CPU work, never
  // the stores' I/O, as flush(). A paused writer must be resumed first.
  virtual void wait_finished(uint64_t n) = 0;
  virtual uint64_t dropped() const = 0;         // jobs refused: queue full
  virtual uint64_t accepted(size_t store) const = 0;  // puts store accepted
  virtual uint64_t queued() const = 0;          // jobs not done yet
  // Tests: a paused writer takes no job until resumed (deterministic races).
  virtual void set_paused(bool paused) = 0;
  // Keys only: the worker makes and stores each job's key and writes no
  // record; jobs it refuses or cannot key are not drops then (no record was
  // due). A cache whose blocks are offered at eviction (device pools) has
  // its commits keyed so, off the serving call: the offer then finds the
  // key made (store_chain.h). Called while no job is out (after a flush).
  virtual void set_keys_only(bool keys_only) = 0;
  // Hints, at the start of a serving call, for the lines the worker shares
  // with it (no effect on what any call does). The cache's lock is released
  // with a locked instruction, which waits for every store of the call: a
  // store into a line the worker holds (the published count, the next
  // run's header) would wait there for the line to come from the worker's
  // core, and a load of the worker's count would wait where it is read.
  // Asked for at the start, those transfers overlap the call's own work.
  // prefetch_submit: the lines a submit writes (for a commit);
  // prefetch_finished: the line finished() reads (for a call that may ask).
  virtual void prefetch_submit() const {}
  virtual void prefetch_finished() const {}
};

// A writer into `stores` (not owned; they outlive it) for records of
// `layout` whose payload is the concatenation of part_bytes; portable
// hashes with `hash_seed` (kvc_config_set_event_hash_seed). Each job's key
// goes to key_table[ticket] (tickets < key_table_size; the table outlives
// the writer): the worker writes an entry only while its job is out, the
// core reads or writes it only while no job of that ticket is out.
std::unique_ptr<RecordWriter> open_record_writer(const RecordLayout& layout,
                                                 std::vector<uint64_t> part_bytes,
                                                 std::vector<BlockStore*> stores, size_t max_jobs,
                                                 uint64_t hash_seed, StoreKey* key_table,
                                                 size_t key_table_size);

// Work the core runs off the serving call, on a thread of the store layer
// (the core starts no thread: defined beside the stores,
// src/store/background_tasks.cpp). Tasks run one at a time, in the order
// posted; the serving thread learns which are done from one counter. Used
// for the offers a device cache copies out at eviction: the call enqueues
// the device copies into pinned staging and posts a task that waits for
// them (Device::wait_fence), seals the records and puts them into the
// stores (store_chain.h, "Offload at eviction").
class BackgroundTasks {
 public:
  virtual ~BackgroundTasks() = default;
  // Queues `task` (it must not throw) and returns its number (1 for the
  // first posted). Takes a lock the worker holds only to take a task, and
  // wakes the worker; never waits for a task.
  virtual uint64_t post(std::function<void()> task) = 0;
  // The first done() tasks posted are done (an acquire load): what they
  // wrote is visible to the caller.
  virtual uint64_t done() const = 0;
  // Waits until done() >= n (n <= the tasks posted).
  virtual void wait_done(uint64_t n) = 0;
};

// One worker thread, run as background work (background_thread.h); the
// destructor runs the tasks posted before it, then joins the thread.
std::unique_ptr<BackgroundTasks> open_background_tasks();

}  // namespace kvc
