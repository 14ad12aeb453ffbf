// KVC_FUZZ_EMIT_C=FILE: the program of the input written as a C program
// against the public API (tests/c/test_fuzz_regressions.c replays such
// reproducers): every call
// with its arguments, its status printed and kvc_cache_check run after it.
// The file is flushed before each call, so it ends at the call that
// crashed. The K/V the harness writes and checks, and the queries with
// hostile buffers, appear as comments: a finding about K/V bytes or a
// status needs the input itself (KVC_FUZZ_TRACE=1 shows the program).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvc_fuzz {

extern const char* g_emit_path;  // NULL: off
bool emitting();
void emit_begin();               // a new input: truncates the file, writes the prelude
void emit_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// `st = CALL; chk(cache, st, "WHAT");`
void emit_call(int cache, const std::string& call, const std::string& what);
void emit_end();                 // destroys the caches, closes main
void emit_stop(const char* why); // a finding: says why and closes main
std::string c_ints(const int32_t* v, uint64_t n);   // a compound literal, or NULL
std::string c_ids(const uint64_t* v, uint64_t n);
std::string c_u64(uint64_t v);

}  // namespace kvc_fuzz
