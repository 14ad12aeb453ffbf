// Helpers for the block store tests: a temporary directory removed at the
// end, and sealed records with recognizable payloads.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/block_record.h"
#include "core/block_store.h"

namespace kvc {
namespace testing_store {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/kvc-store-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = ::mkdtemp(buf.data());
  }
  ~TempDir() {
    if (DIR* d = ::opendir(path_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") ::unlink((path_ + "/" + n).c_str());
      }
      ::closedir(d);
    }
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  // Regular files in the directory (dot files included).
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(path_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") out.push_back(n);
      }
      ::closedir(d);
    }
    return out;
  }

 private:
  std::string path_;
};

inline RecordLayout test_layout(uint64_t payload_bytes = 4096) {
  RecordLayout l;
  l.fingerprint = 0xfeedULL;
  l.tokens_per_block = 4;
  l.payload_bytes = payload_bytes;
  return l;
}

// A sealed record for block `i` (tokens and payload derived from i).
struct TestRecord {
  std::vector<int32_t> tokens;
  RecordKey key;
  std::vector<unsigned char> bytes;
  TestRecord(const RecordLayout& l, uint64_t i, uint32_t priority = 35) {
    for (uint32_t t = 0; t < l.tokens_per_block; ++t) tokens.push_back(int32_t(i * 100 + t));
    key.lookup_hash = 0x1000 + i;
    key.digest = block_chain_digest(ChainDigest{}, scope_chain_digest("s"), ChainDigest{},
                                    tokens.data(), l.tokens_per_block);
    key.tokens = tokens.data();
    bytes.resize(l.record_bytes());
    for (size_t b = 0; b < l.payload_bytes; ++b)
      bytes[l.header_bytes() + b] = static_cast<unsigned char>(b * 13 + i * 7 + 1);
    seal_record(l, key, priority, bytes.data());
  }
};

// Loads hashes[0..n) into fresh buffers; returns the leading count.
inline size_t load_n(BlockStore& s, const std::vector<uint64_t>& hashes,
                     std::vector<std::vector<unsigned char>>& out) {
  out.assign(hashes.size(), std::vector<unsigned char>(s.layout().record_bytes()));
  std::vector<unsigned char*> ptrs;
  for (auto& b : out) ptrs.push_back(b.data());
  return s.load(hashes.data(), hashes.size(), ptrs.data());
}

}  // namespace testing_store
}  // namespace kvc
