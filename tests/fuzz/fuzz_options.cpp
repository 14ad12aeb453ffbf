#include "fuzz_options.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <tuple>

namespace kvc_fuzz {

uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

namespace {

const uint32_t kPriorities[8] = {35, 0, 10, 60, 90, 100, 35, 35};

uint64_t hash_bytes(uint64_t h, const std::string& s) {
  h = mix64(h ^ (s.size() + 0x51));
  for (unsigned char c : s) h = mix64(h ^ c);
  return h;
}

// struct_size values that end at a field boundary (a pointer is never cut
// in half: the library would read the half-default pointer as the caller's).
size_t boundary(uint32_t k) {
  switch (k % 12) {
    case 0: return offsetof(kvc_sequence_options_t, prompt_priority);
    case 1: return offsetof(kvc_sequence_options_t, decode_priority);
    case 2: return offsetof(kvc_sequence_options_t, has_lora);
    case 3: return offsetof(kvc_sequence_options_t, has_lora) + 1;
    case 4: return offsetof(kvc_sequence_options_t, lora_id);
    case 5: return offsetof(kvc_sequence_options_t, salt);
    case 6: return offsetof(kvc_sequence_options_t, salt_size);
    case 7: return offsetof(kvc_sequence_options_t, extra_keys);
    case 8: return offsetof(kvc_sequence_options_t, num_extra_keys);
    case 9: return offsetof(kvc_sequence_options_t, retention_ranges);
    case 10: return offsetof(kvc_sequence_options_t, num_retention_ranges);
    default: return offsetof(kvc_sequence_options_t, decode_duration_ms);
  }
}

}  // namespace

std::unique_ptr<Options> Options::decode(Input& in) {
  auto o = std::make_unique<Options>();
  const uint8_t b0 = in.u8(), b1 = in.u8();
  if (b1 == 0xFF) {
    o->null_ = true;
    return o;
  }
  kvc_sequence_options_t v = KVC_SEQUENCE_OPTIONS_INIT;
  // Scopes that differ by little: no salt, an empty one, "a", "ab" passed
  // with size 1 (the same as "a"), "ab", "b"; no LoRA, LoRA 0, 1 or 2^63.
  static const char* const kSalts[8] = {nullptr, nullptr, "", "a", "ab", "ab", "b", "ba"};
  static const size_t kSaltSizes[8] = {0, 0, 0, 1, 1, 2, 1, 2};
  if (kSalts[b0 & 7] != nullptr) {
    o->salt_store_ = kSalts[b0 & 7];
    v.salt = o->salt_store_.data();
    v.salt_size = kSaltSizes[b0 & 7];
  }
  switch ((b0 >> 3) & 3) {
    case 1: v.has_lora = true; v.lora_id = 0; break;
    case 2: v.has_lora = true; v.lora_id = 1; break;
    case 3: v.has_lora = (b1 & 0x80) != 0; v.lora_id = uint64_t(1) << 63; break;  // an id without has_lora is ignored
    default: break;
  }
  v.prompt_priority = kPriorities[b1 & 7];
  v.decode_priority = kPriorities[(b1 >> 3) & 7];
  const uint32_t nkeys = ((b0 >> 5) & 3) == 3 ? 2 : ((b0 >> 5) & 3) == 2 ? 1 : 0;
  const uint32_t nranges = (b0 >> 7) ? 1 + in.below(3) : 0;
  static const char* const kData[4] = {"img", "vid", "", "img"};
  o->key_data_.reserve(nkeys);
  for (uint32_t i = 0; i < nkeys; ++i) {
    const uint8_t a = in.u8(), b = in.u8();
    kvc_extra_key_t k{};
    k.offset = a % 24;
    k.length = 1 + b % 8;
    if ((b & 0xF0) == 0xF0) k.length = kMaxTokens + 1;  // beyond the longest sequence
    o->key_data_.push_back(kData[(a >> 5) & 3]);
    k.data = o->key_data_.back().empty() && (a & 0x10) ? nullptr : o->key_data_.back().data();
    k.size = o->key_data_.back().size();
    o->keys_.push_back(k);
  }
  uint64_t at = 0;
  for (uint32_t i = 0; i < nranges; ++i) {
    const uint8_t a = in.u8(), b = in.u8(), c = in.u8();
    kvc_retention_range_t r{};
    r.start = at + (a & 7) - ((a & 0x3F) == 0x3F ? 3 : 0);  // rarely overlapping the previous one
    if (r.start > at + 7) r.start = 0;
    r.end = (b & 0xF0) == 0xF0 ? KVC_RETENTION_OPEN_END : r.start + (b & 15);  // +0: end <= start
    r.priority = kPriorities[c & 7];
    r.duration_ms = (c >> 3) & 1 ? (c >> 4) * 5 : 0;
    r.reserved = (a & 0xC7) == 0xC0 ? 1 : 0;  // must be refused
    if ((a & 0xC7) == 0x87) {  // out of token order
      r.start = 60 - r.start % 8;
      if (r.end != KVC_RETENTION_OPEN_END) r.end = r.start + 2;
    }
    o->ranges_.push_back(r);
    at = r.end == KVC_RETENTION_OPEN_END ? r.start + 1 : r.end;
  }
  v.extra_keys = o->keys_.empty() ? nullptr : o->keys_.data();
  v.num_extra_keys = o->keys_.size();
  v.retention_ranges = o->ranges_.empty() ? nullptr : o->ranges_.data();
  v.num_retention_ranges = o->ranges_.size();
  v.decode_duration_ms = (b1 >> 6) == 1 ? 7 : 0;

  size_t size = sizeof(v);
  int nonzero_tail = -1;
  if ((b1 >> 6) == 3) {
    const uint8_t s = in.u8();
    switch (s % 16) {
      case 0: size = (s >> 4) % 2 ? 0 : 3; break;
      case 1:
        if (s & 0x10) v.prompt_priority = 101;
        else v.decode_priority = 101;
        break;
      case 12: size = sizeof(v) + 8; break;
      case 13: size = sizeof(v) + 8; nonzero_tail = int(sizeof(v) + (s >> 4) % 8); break;
      case 14: v.salt = nullptr; v.salt_size = 3; break;  // NULL salt with a size
      case 15:
        if (!o->keys_.empty() && (s & 0x10)) o->keys_[0].length = 0;
        else if (!o->keys_.empty()) o->keys_[0].data = nullptr, o->keys_[0].size = 2;  // NULL key data
        else if (!o->ranges_.empty()) v.retention_ranges = nullptr;
        else v.extra_keys = nullptr, v.num_extra_keys = 1;
        break;
      default: size = boundary(s % 16 - 2 + (s >> 4)); break;
    }
  }
  v.struct_size = uint32_t(size);
  o->raw_ = v;
  o->nonzero_tail_ = nonzero_tail;
  o->buf_.assign((std::max(size, sizeof(v)) + 7) / 8, 0);
  std::memcpy(o->buf_.data(), &v, sizeof(v));
  if (nonzero_tail >= 0) reinterpret_cast<unsigned char*>(o->buf_.data())[nonzero_tail] = 0x5A;
  // Exactly struct_size bytes readable, so a read past it is caught.
  if (size < sizeof(v)) o->buf_.resize(std::max<size_t>(1, (size + 7) / 8));
  o->finish();
  return o;
}

// What the library must make of the bytes (its read_sized and checks, as
// the header describes them).
void Options::finish() {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(buf_.data());
  uint32_t size;
  std::memcpy(&size, bytes, sizeof(size));
  if (size < sizeof(uint32_t)) {
    invalid = true;
    return;
  }
  for (size_t i = sizeof(kvc_sequence_options_t); i < size; ++i)
    if (bytes[i] != 0) invalid = true;
  kvc_sequence_options_t e = KVC_SEQUENCE_OPTIONS_INIT;
  std::memcpy(&e, bytes, std::min<size_t>(size, sizeof(e)));
  if (e.prompt_priority > 100 || e.decode_priority > 100) invalid = true;
  prompt_priority = e.prompt_priority;
  decode_priority = e.decode_priority;
  if (e.salt == nullptr && e.salt_size > 0) invalid = true;
  has_salt = e.salt != nullptr;
  if (has_salt) salt.assign(static_cast<const char*>(e.salt), e.salt_size);
  has_lora = e.has_lora;
  lora_id = e.has_lora ? e.lora_id : 0;
  if (e.extra_keys == nullptr && e.num_extra_keys > 0) invalid = true;
  for (size_t i = 0; e.extra_keys != nullptr && i < e.num_extra_keys; ++i) {
    const kvc_extra_key_t& k = e.extra_keys[i];
    if (k.data == nullptr && k.size > 0) invalid = true;
    if (k.length == 0 || k.offset > kMaxTokens || k.length > kMaxTokens) invalid = true;
    ExtraKeyModel m;
    m.offset = k.offset;
    m.length = k.length;
    if (k.size > 0 && k.data != nullptr) m.data.assign(static_cast<const char*>(k.data), k.size);
    extras.push_back(m);
  }
  std::sort(extras.begin(), extras.end(), [](const ExtraKeyModel& a, const ExtraKeyModel& b) {
    return std::tie(a.offset, a.length, a.data) < std::tie(b.offset, b.length, b.data);
  });
  if (e.retention_ranges == nullptr && e.num_retention_ranges > 0) invalid = true;
  for (size_t i = 0; e.retention_ranges != nullptr && i < e.num_retention_ranges; ++i) {
    const kvc_retention_range_t& r = e.retention_ranges[i];
    if (r.priority > 100 || r.end <= r.start || r.reserved != 0) invalid = true;
    if (r.end == KVC_RETENTION_OPEN_END && i + 1 != e.num_retention_ranges) invalid = true;
    for (size_t j = 0; j < i; ++j) {
      const kvc_retention_range_t& q = e.retention_ranges[j];
      if (r.start < q.end && q.start < r.end) invalid = true;
      if (q.start >= r.end) unchecked_precondition = true;  // not in token order
    }
  }
}

uint64_t Options::scope_hash() const {
  uint64_t h = mix64(0x5C0FE ^ (has_salt ? 1 : 2));
  if (has_salt) h = hash_bytes(h, salt);
  h = mix64(h ^ (has_lora ? 3 : 4));
  if (has_lora) h = mix64(h ^ lora_id);
  return h;
}

uint32_t Options::scope_index() const {
  static const char* const kKnown[5] = {"", "a", "ab", "b", "ba"};
  uint32_t salt_index = 6;
  if (!has_salt) salt_index = 0;
  for (uint32_t i = 0; i < 5 && has_salt; ++i)
    if (salt == kKnown[i]) salt_index = i + 1;
  const uint32_t lora = !has_lora ? 0 : lora_id == 0 ? 1 : lora_id == 1 ? 2 : 3;
  return salt_index * 4 + lora;
}

namespace {

std::string c_string(const char* p, size_t n) {
  if (p == nullptr) return "NULL";
  std::string s = "\"";
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s + "\"";
}

}  // namespace

std::string Options::c_decl(int n) const {
  if (null_) return "";
  const std::string N = std::to_string(n);
  const kvc_sequence_options_t& v = raw_;
  std::string s;
  if (v.extra_keys != nullptr) {
    s += "kvc_extra_key_t k" + N + "[] = {";
    for (size_t i = 0; i < keys_.size(); ++i) {
      const kvc_extra_key_t& k = keys_[i];
      s += (i ? ", {" : "{") + std::to_string(k.offset) + ", " + std::to_string(k.length) + "ull, " +
           c_string(static_cast<const char*>(k.data), k.size) + ", " + std::to_string(k.size) + "}";
    }
    s += "}; ";
  }
  if (v.retention_ranges != nullptr) {
    s += "kvc_retention_range_t r" + N + "[] = {";
    for (size_t i = 0; i < ranges_.size(); ++i) {
      const kvc_retention_range_t& r = ranges_[i];
      s += (i ? ", {" : "{") + std::to_string(r.start) + ", " +
           (r.end == KVC_RETENTION_OPEN_END ? std::string("KVC_RETENTION_OPEN_END") : std::to_string(r.end)) +
           ", " + std::to_string(r.priority) + ", " + std::to_string(r.reserved) + ", " +
           std::to_string(r.duration_ms) + "}";
    }
    s += "}; ";
  }
  s += "kvc_sequence_options_t o" + N + " = KVC_SEQUENCE_OPTIONS_INIT; ";
  const std::string o = "o" + N + ".";
  s += o + "prompt_priority = " + std::to_string(v.prompt_priority) + "; " + o + "decode_priority = " +
       std::to_string(v.decode_priority) + "; ";
  if (v.has_lora) s += o + "has_lora = true; ";
  if (v.lora_id != 0) s += o + "lora_id = " + std::to_string(v.lora_id) + "ull; ";
  if (v.salt != nullptr || v.salt_size != 0)
    s += o + "salt = " + c_string(static_cast<const char*>(v.salt), salt_store_.size()) + "; " + o +
         "salt_size = " + std::to_string(v.salt_size) + "; ";
  if (v.extra_keys != nullptr || v.num_extra_keys != 0)
    s += o + "extra_keys = " + (v.extra_keys ? "k" + N : std::string("NULL")) + "; " + o +
         "num_extra_keys = " + std::to_string(v.num_extra_keys) + "; ";
  if (v.retention_ranges != nullptr || v.num_retention_ranges != 0)
    s += o + "retention_ranges = " + (v.retention_ranges ? "r" + N : std::string("NULL")) + "; " + o +
         "num_retention_ranges = " + std::to_string(v.num_retention_ranges) + "; ";
  if (v.decode_duration_ms != 0)
    s += o + "decode_duration_ms = " + std::to_string(v.decode_duration_ms) + "; ";
  if (v.struct_size < sizeof(v)) s += o + "struct_size = " + std::to_string(v.struct_size) + "; ";
  else if (v.struct_size > sizeof(v))
    s += "/* struct_size " + std::to_string(v.struct_size) + " with " +
         (nonzero_tail_ >= 0 ? "a non-zero" : "a zero") + " tail past the struct: not reproduced */ ";
  return s;
}

std::string Options::describe() const {
  if (null_) return "NULL options";
  std::string s = "options{";
  s += has_salt ? "salt \"" + salt + "\"" : "no salt";
  s += has_lora ? ", lora " + std::to_string(lora_id) : ", no lora";
  s += ", prio " + std::to_string(prompt_priority) + "/" + std::to_string(decode_priority);
  for (const ExtraKeyModel& k : extras)
    s += ", key " + std::to_string(k.offset) + "+" + std::to_string(k.length) + " \"" + k.data + "\"";
  s += ", " + std::to_string(ranges_.size()) + " ranges";
  if (invalid) s += ", INVALID";
  return s + "}";
}

}  // namespace kvc_fuzz
