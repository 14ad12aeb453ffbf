// DiskStore at open (disk_store.h): the index rebuilt from the slab files
// the previous process left, so that a restart keeps its prefix cache. Only
// sound records of this geometry are indexed; torn or foreign slots are
// invalidated, a second copy of a hash is dropped, a smaller budget drops
// the lowest priorities first and moves survivors below it.
#include "store/disk_store.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "base/hex.h"

namespace kvc {

void DiskStore::open_index() {
  // The former one-file-per-block format of this geometry: block files
  // `<fingerprint>-<hash>.kvb` and temporary files. Not read: removed.
  const std::string prefix = hex16(layout_.fingerprint) + "-";
  const std::string tmp_prefix = ".tmp-" + prefix;
  if (DIR* d = ::opendir(dir_.c_str())) {
    std::vector<std::string> old;
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.compare(0, tmp_prefix.size(), tmp_prefix) == 0 ||
          (name.size() == prefix.size() + 16 + 4 && name.compare(0, prefix.size(), prefix) == 0 &&
           name.compare(name.size() - 4, 4, ".kvb") == 0))
        old.push_back(name);
    }
    ::closedir(d);
    for (const std::string& name : old) ::unlink((dir_ + "/" + name).c_str());
  }

  // Every slot's header, in slot order.
  struct Found {
    uint64_t hash, slot;
    uint32_t priority;
  };
  std::vector<Found> found;
  std::vector<uint64_t> stale;  // slots with something that is not an indexed record
  slabs_->scan(kRecordFixedHeader, [&](uint64_t slot, const unsigned char* head, size_t size) {
    static const unsigned char kZero[8] = {};
    if (size < kRecordFixedHeader || std::memcmp(head, kZero, 8) == 0) {
      // Never written, zeroed, or cut short by the end of the file.
      if (size < layout_.record_bytes() && std::memcmp(head, kZero, 8) != 0) ++counters_.rejected;
      return;
    }
    const RecordHeader h = read_record_header(head);
    const bool sound = size == layout_.record_bytes() && h.magic_ok &&
                       h.version == kRecordVersion && h.fingerprint == layout_.fingerprint &&
                       h.header_bytes == layout_.header_bytes() &&
                       h.payload_bytes == layout_.payload_bytes &&
                       h.num_tokens == layout_.tokens_per_block;
    if (sound) {
      found.push_back(Found{h.lookup_hash, slot, std::min<uint32_t>(h.priority, 100)});
    } else {  // torn (a power loss) or not a record
      ++counters_.rejected;
      stale.push_back(slot);
    }
  });
  for (const Found& f : found) {
    if (index_.count(f.hash) != 0) {  // a second copy (a crash between two writes): one is enough
      stale.push_back(f.slot);
      continue;
    }
    index_[f.hash] = Entry{f.priority, ++clock_, f.slot, kWritten, true};
    filter_.add(f.hash);
    lru_.emplace(f.priority, clock_, f.hash);
  }
  // A smaller budget than last time: the lowest go.
  while (index_.size() > max_records_) {
    const uint64_t hash = std::get<2>(*lru_.begin());
    const uint64_t slot = index_[hash].slot;
    lru_.erase(lru_.begin());
    index_.erase(hash);
    filter_.remove(hash);
    stale.push_back(slot);
    ++counters_.evictions;
  }
  for (uint64_t slot : stale)
    if (slot < max_records_ && slabs_->invalidate(slot) != 0) ++counters_.errors;
  // Records in slots past the budget move to free slots below it.
  uint64_t top = 0;
  for (const auto& kv : index_) top = std::max(top, kv.second.slot + 1);
  std::vector<bool> taken(size_t(std::min(top, max_records_)), false);
  std::vector<uint64_t> movers;
  for (const auto& [hash, e] : index_) {
    if (e.slot < max_records_) taken[size_t(e.slot)] = true;
    else movers.push_back(hash);
  }
  uint64_t next_free = 0;
  std::vector<unsigned char> buf(movers.empty() ? 0 : layout_.record_bytes());
  for (uint64_t hash : movers) {
    // index_.size() <= max_records_: a free slot exists below the budget.
    while (next_free < taken.size() && taken[size_t(next_free)]) ++next_free;
    if (next_free == taken.size()) taken.push_back(false);
    Entry& e = index_[hash];
    unsigned char* out = buf.data();
    const unsigned char* in = buf.data();
    int err = slabs_->read(e.slot, &out, 1);
    if (err == 0) err = slabs_->reserve(next_free);
    if (err == 0) err = slabs_->write(next_free, &in, 1);
    if (err != 0) {
      ++counters_.errors;
      lru_.erase(LruKey{e.priority, e.age, hash});
      index_.erase(hash);
      filter_.remove(hash);
      continue;
    }
    e.slot = next_free;
    taken[size_t(next_free)] = true;
  }
  slabs_->shrink(max_records_);
  uint64_t used = 0;
  for (const auto& kv : index_) used = std::max(used, kv.second.slot + 1);
  generation_.assign(size_t(used), 0);
  for (uint64_t s = 0; s < used; ++s)
    if (s >= taken.size() || !taken[size_t(s)]) free_slots_.insert(s);
}

}  // namespace kvc
