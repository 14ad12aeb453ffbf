// A small parser for the flat records of a Mooncake trace. The records hold
// only numbers, arrays of numbers and (ignored) strings or literals, so a
// full JSON library is not needed; anything else is reported with its line.
#include "trace_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace sim {
namespace {

class LineParser {
 public:
  explicit LineParser(const std::string &line) : s_(line) {}

  bool parse(double &timestamp, bool &has_ts, double &input, bool &has_in, double &output,
             bool &has_out, std::vector<uint64_t> &hash_ids, bool &has_ids) {
    skip_ws();
    if (!eat('{')) return fail("expected '{'");
    skip_ws();
    if (eat('}')) return finish();
    for (;;) {
      std::string key;
      if (!parse_string(key)) return false;
      skip_ws();
      if (!eat(':')) return fail("expected ':' after \"" + key + "\"");
      skip_ws();
      if (key == "timestamp") {
        if (!parse_number(timestamp)) return false;
        has_ts = true;
      } else if (key == "input_length") {
        if (!parse_number(input)) return false;
        has_in = true;
      } else if (key == "output_length") {
        if (!parse_number(output)) return false;
        has_out = true;
      } else if (key == "hash_ids") {
        if (!parse_id_array(hash_ids)) return false;
        has_ids = true;
      } else if (!skip_value()) {
        return false;
      }
      skip_ws();
      if (eat('}')) return finish();
      if (!eat(',')) return fail("expected ',' or '}'");
      skip_ws();
    }
  }

  const std::string &error() const { return error_; }

 private:
  bool finish() {
    skip_ws();
    if (pos_ != s_.size()) return fail("text after the closing '}'");
    return true;
  }
  bool fail(const std::string &what) {
    error_ = what + " at column " + std::to_string(pos_ + 1);
    return false;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool parse_string(std::string &out) {
    if (!eat('"')) return fail("expected a string");
    while (pos_ < s_.size() && s_[pos_] != '"') {
      if (s_[pos_] == '\\') ++pos_;  // keys here are plain; keep escapes verbatim
      if (pos_ < s_.size()) out.push_back(s_[pos_++]);
    }
    if (!eat('"')) return fail("unterminated string");
    return true;
  }
  bool parse_number(double &out) {
    const char *begin = s_.c_str() + pos_;
    char *end = nullptr;
    out = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(out)) return fail("expected a number");
    pos_ += static_cast<size_t>(end - begin);
    return true;
  }
  bool parse_id_array(std::vector<uint64_t> &out) {
    if (!eat('[')) return fail("expected '[' for hash_ids");
    skip_ws();
    if (eat(']')) return true;
    for (;;) {
      skip_ws();
      double v = 0;
      const size_t start = pos_;
      if (!parse_number(v)) return false;
      if (v < 0 || v != std::floor(v) || v >= 72057594037927936.0)  // 2^56: the seed range
        return pos_ = start, fail("hash id must be an integer in [0, 2^56)");
      out.push_back(static_cast<uint64_t>(v));
      skip_ws();
      if (eat(']')) return true;
      if (!eat(',')) return fail("expected ',' or ']' in hash_ids");
    }
  }
  bool skip_value() {
    if (pos_ >= s_.size()) return fail("missing value");
    char c = s_[pos_];
    if (c == '"') {
      std::string ignored;
      return parse_string(ignored);
    }
    if (c == '[') {
      std::vector<uint64_t> ignored;
      return parse_id_array(ignored);
    }
    for (const char *lit : {"true", "false", "null"}) {
      size_t n = std::char_traits<char>::length(lit);
      if (s_.compare(pos_, n, lit) == 0) {
        pos_ += n;
        return true;
      }
    }
    double ignored = 0;
    return parse_number(ignored);
  }

  const std::string &s_;
  size_t pos_ = 0;
  std::string error_;
};

bool whole_nonnegative(double v) { return v >= 0 && v == std::floor(v) && v < 4294967296.0; }

}  // namespace

bool parse_trace(const std::string &text, const std::string &name, const TraceOptions &options,
                 Workload &out, std::string &error) {
  if (!(options.speed > 0)) {
    error = "speed must be > 0";
    return false;
  }
  Workload w;
  w.name = name;
  std::istringstream in(text);
  std::string line;
  uint64_t line_no = 0;
  double last_ts = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (options.max_requests && w.requests.size() >= options.max_requests) break;
    double ts = 0, input = 0, output = 0;
    bool has_ts = false, has_in = false, has_out = false, has_ids = false;
    std::vector<uint64_t> ids;
    LineParser p(line);
    auto bad = [&](const std::string &what) {
      error = name + ":" + std::to_string(line_no) + ": " + what;
      return false;
    };
    if (!p.parse(ts, has_ts, input, has_in, output, has_out, ids, has_ids)) return bad(p.error());
    if (!has_ts || !has_in || !has_out || !has_ids)
      return bad("a record needs timestamp, input_length, output_length and hash_ids");
    if (!whole_nonnegative(input) || input < 1) return bad("input_length must be a whole number >= 1");
    if (!whole_nonnegative(output)) return bad("output_length must be a whole number >= 0");
    if (ts < 0) return bad("timestamp must be >= 0");
    if (ts < last_ts) return bad("timestamps must not decrease");
    last_ts = ts;
    const uint32_t n_in = static_cast<uint32_t>(input);
    const uint64_t blocks_needed = (n_in + kTraceBlockTokens - 1) / kTraceBlockTokens;
    if (ids.size() != blocks_needed)
      return bad("input_length " + std::to_string(n_in) + " needs " +
                 std::to_string(blocks_needed) + " hash ids of 512 tokens, got " +
                 std::to_string(ids.size()));
    Request r;
    r.id = w.requests.size();
    r.arrival_s = ts / 1000.0 / options.speed;
    r.input_length = n_in;
    // A request decodes at least the token its prefill produces.
    r.output_length = std::max<uint32_t>(1, static_cast<uint32_t>(output));
    r.output_seed = make_seed(kSeedOutput, r.id);
    for (size_t i = 0; i < ids.size(); ++i) {
      uint32_t len = static_cast<uint32_t>(
          std::min<uint64_t>(kTraceBlockTokens, n_in - i * uint64_t{kTraceBlockTokens}));
      r.prompt.push_back({make_seed(kSeedTraceBlock, ids[i]), len});
    }
    w.requests.push_back(std::move(r));
  }
  if (w.requests.empty()) {
    error = name + ": no records";
    return false;
  }
  out = std::move(w);
  return true;
}

bool read_trace(const std::string &path, const TraceOptions &options, Workload &out,
                std::string &error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    error = "cannot open trace " + path +
            " (traces/README.md says where the Mooncake traces come from)";
    return false;
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string name = path.substr(path.find_last_of('/') + 1);
  return parse_trace(ss.str(), name, options, out, error);
}

}  // namespace sim
