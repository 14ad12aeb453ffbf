#include "fuzz_emit.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>

namespace kvc_fuzz {

const char* g_emit_path = nullptr;

namespace {

FILE* g_file = nullptr;

// After every statement the file ends with a provisional end of main, the
// next statement overwrites: a crash leaves a program that compiles.
void provisional_end() {
  const long at = std::ftell(g_file);
  std::fputs("  return 0;\n}\n", g_file);
  std::fflush(g_file);
  std::fseek(g_file, at, SEEK_SET);
}

void close_file() {
  std::fflush(g_file);
  if (ftruncate(fileno(g_file), std::ftell(g_file)) != 0) std::perror("KVC_FUZZ_EMIT_C");
  std::fclose(g_file);
  g_file = nullptr;
}

}  // namespace

bool emitting() { return g_file != nullptr; }

void emit_begin() {
  if (g_emit_path == nullptr) return;
  if (g_file != nullptr) std::fclose(g_file);
  g_file = std::fopen(g_emit_path, "w");
  if (g_file == nullptr) return;
  std::fputs(
      "/* Written by a kvcache_fuzz harness (KVC_FUZZ_EMIT_C) from one input.\n"
      " * Build against a sanitizer build of the library, e.g. the asan preset:\n"
      " *   cc repro.c -Iinclude -Ibuild/asan/include -Lbuild/asan -lkvcache \\\n"
      " *      -Wl,-rpath,build/asan -fsanitize=address,undefined */\n"
      "#include <kvcache/kvcache.h>\n#include <stdio.h>\n\n"
      "static kvc_cache_t *c[2];\nstatic int step;\n"
      "static void chk(int k, kvc_status_t st, const char *what) {\n"
      "  ++step;\n"
      "  printf(\"%d: cache %d %s -> %s\\n\", step, k, what, kvc_status_string(st));\n"
      "  if (kvc_cache_check(c[k]) != KVC_OK) printf(\"  kvc_cache_check: %s\\n\", "
      "kvc_last_error_message());\n"
      "  fflush(stdout);\n}\n\n"
      "int main(void) {\n  kvc_config_t *cfg = NULL;\n  kvc_status_t st;\n"
      "  uint64_t u64 = 0;\n  (void)u64;\n",
      g_file);
  provisional_end();
}

void emit_line(const char* fmt, ...) {
  if (g_file == nullptr) return;
  std::fputs("  ", g_file);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(g_file, fmt, ap);
  va_end(ap);
  std::fputc('\n', g_file);
  provisional_end();
}

void emit_call(int cache, const std::string& call, const std::string& what) {
  emit_line("st = %s;", call.c_str());
  emit_line("chk(%d, st, \"%s\");", cache, what.c_str());
}

void emit_end() {
  if (g_file == nullptr) return;
  std::fputs("  kvc_cache_destroy(c[0]);\n  kvc_cache_destroy(c[1]);\n  puts(\"done\");\n"
             "  return 0;\n}\n", g_file);
  close_file();
}

void emit_stop(const char* why) {
  if (g_file == nullptr) return;
  std::fprintf(g_file, "  /* the harness stopped here: %s */\n  return 1;\n}\n", why);
  close_file();
}

std::string c_ints(const int32_t* v, uint64_t n) {
  if (v == nullptr) return "NULL";
  if (n == 0) return "(const int32_t[]){0}";
  std::string s = "(const int32_t[]){";
  for (uint64_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += v[i] == INT32_MIN ? std::string("INT32_MIN") : std::to_string(v[i]);
  }
  return s + "}";
}

std::string c_ids(const uint64_t* v, uint64_t n) {
  if (v == nullptr) return "NULL";
  std::string s = "(const uint64_t[]){";
  for (uint64_t i = 0; i < n; ++i) s += (i ? ", " : "") + c_u64(v[i]);
  return s + (n == 0 ? "0}" : "}");
}

std::string c_u64(uint64_t v) { return std::to_string(v) + "ull"; }

}  // namespace kvc_fuzz
