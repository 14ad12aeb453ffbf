/* C API of the remote tier (remote_tier.h) against a real redis-server
 * started by the test on a loopback port: the settings and their errors,
 * the refusals at create (unreachable server, wrong password) and the
 * optional flag, a second process that computes a prompt which this process
 * then reuses bit for bit, salts that never meet, and the tier's
 * statistics. Skips, saying why, without hiredis or redis-server. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <kvcache/kvcache.h>

#include "kvc_test_assert.h"
#include "redis_server.h"
#include "remote_tier_common.h"

#define ok(call) assert_int_equal((call), KVC_OK)

static kvc_test_redis server;
static const char *unavailable; /* why the tests that need a server skip */

static int start_server(void **state) {
  (void)state;
  if ((kvc_features() & KVC_FEATURE_REDIS) == 0) {
    unavailable = "built without hiredis: install libhiredis-dev and rebuild";
  } else if (kvc_test_redis_binary(&unavailable) != NULL &&
             kvc_test_redis_start(&server, NULL) != 0) {
    unavailable = server.why;
  }
  if (unavailable != NULL) printf("remote tier tests skip: %s\n", unavailable);
  return 0;
}

static int stop_server(void **state) {
  (void)state;
  kvc_test_redis_stop(&server);
  return 0;
}

#define NEED_SERVER()                   \
  do {                                  \
    if (unavailable != NULL) skip();    \
  } while (0)

static kvc_cache_t *create(kvc_config_t *c) {
  kvc_cache_t *cache = NULL;
  ok(kvc_cache_create(c, &cache));
  return cache;
}

static kvc_tier_stats_t remote_stats(kvc_cache_t *cache) {
  ok(kvc_cache_flush_tiers(cache));
  kvc_tier_stats_t s = KVC_TIER_STATS_INIT;
  ok(kvc_cache_get_tier_stats(cache, KVC_TIER_REMOTE, &s));
  return s;
}

static void settings_and_errors(void **state) {
  (void)state;
  kvc_config_t *c = rt_config(NULL, 4);
  const char *url = NULL, *ns = NULL;
  uint64_t bytes = 7;
  uint32_t connect_ms = 0, command_ms = 0;
  bool optional = true;
  ok(kvc_config_get_remote_cache(c, &url, &ns, &bytes));
  assert_string_equal(url, "");
  assert_string_equal(ns, "kvc");
  assert_int_equal(bytes, 0);
  ok(kvc_config_get_remote_cache_timeouts(c, &connect_ms, &command_ms));
  assert_int_equal(connect_ms, 1000);
  assert_int_equal(command_ms, 1000);
  ok(kvc_config_get_remote_cache_optional(c, &optional));
  assert_false(optional);

  ok(kvc_config_set_remote_cache(c, "redis://:pw@127.0.0.1:7000/2", "team.a-1", 4096));
  ok(kvc_config_get_remote_cache(c, &url, &ns, &bytes));
  assert_string_equal(url, "redis://:pw@127.0.0.1:7000/2");
  assert_string_equal(ns, "team.a-1");
  assert_int_equal(bytes, 4096);
  ok(kvc_config_set_remote_cache_timeouts(c, 50, 20));
  ok(kvc_config_get_remote_cache_timeouts(c, &connect_ms, &command_ms));
  assert_int_equal(connect_ms, 50);
  assert_int_equal(command_ms, 20);
  ok(kvc_config_set_remote_cache_optional(c, true));
  ok(kvc_config_get_remote_cache_optional(c, &optional));
  assert_true(optional);

  /* Refusals name the part at fault; nothing changes. */
  assert_fails(kvc_config_set_remote_cache(c, "redis://127.0.0.1:99999/0", NULL, 1),
               KVC_ERR_INVALID_ARGUMENT, "the port 99999 is not in 1..65535");
  assert_fails(kvc_config_set_remote_cache(c, "http://h/0", NULL, 1), KVC_ERR_INVALID_ARGUMENT,
               "the scheme must be redis://");
  assert_fails(kvc_config_set_remote_cache(c, "redis://u:secret@h:1/x", NULL, 1),
               KVC_ERR_INVALID_ARGUMENT, "the database \"x\" is not a number");
  assert_null(strstr(kvc_last_error_message(), "secret"));
  assert_fails(kvc_config_set_remote_cache(c, "redis://h:1/0", "a b", 1),
               KVC_ERR_INVALID_ARGUMENT, "may hold only letters, digits, '.', '_' and '-'");
  assert_fails(kvc_config_set_remote_cache(c, "redis://h:1/0", NULL, 0), KVC_ERR_INVALID_ARGUMENT,
               "remote cache bytes must be > 0 for redis://h:1/0, got 0");
  assert_fails(kvc_config_set_remote_cache(c, NULL, NULL, 5), KVC_ERR_INVALID_ARGUMENT,
               "remote cache bytes must be 0 without a URL, got 5");
  assert_fails(kvc_config_set_remote_cache_timeouts(c, 0, 10), KVC_ERR_INVALID_ARGUMENT,
               "connect_ms must be in 1..600000 ms, got 0");
  assert_fails(kvc_config_set_remote_cache_timeouts(c, 10, 600001), KVC_ERR_INVALID_ARGUMENT,
               "command_ms must be in 1..600000 ms, got 600001");
  assert_fails(kvc_config_set_remote_cache(NULL, NULL, NULL, 0), KVC_ERR_INVALID_ARGUMENT,
               "config must not be NULL");
  assert_fails(kvc_config_get_remote_cache_optional(c, NULL), KVC_ERR_INVALID_ARGUMENT,
               "out must not be NULL");
  ok(kvc_config_get_remote_cache(c, &url, &ns, &bytes));
  assert_string_equal(url, "redis://:pw@127.0.0.1:7000/2");
  assert_int_equal(bytes, 4096);
  ok(kvc_config_get_remote_cache_timeouts(c, &connect_ms, &command_ms));
  assert_int_equal(command_ms, 20);

  /* Off again: its own settings alone would be ignored, so create refuses
   * them; with block reuse off a remote tier is refused. */
  ok(kvc_config_set_remote_cache(c, NULL, NULL, 0));
  ok(kvc_config_get_remote_cache(c, &url, NULL, NULL));
  assert_string_equal(url, "");
  kvc_cache_t *cache = NULL;
  assert_fails(kvc_cache_create(c, &cache), KVC_ERR_INVALID_ARGUMENT,
               "remote cache timeouts (50, 20 ms) or optional flag (true) are set without a "
               "remote cache");
  ok(kvc_config_set_remote_cache_timeouts(c, 1000, 1000));
  ok(kvc_config_set_remote_cache_optional(c, false));
  ok(kvc_cache_create(c, &cache));
  kvc_cache_destroy(cache);
  cache = NULL;
  ok(kvc_config_set_remote_cache(c, "redis://127.0.0.1:1/0", NULL, 1 << 20));
  /* The stateful mode has no stores: refused, not ignored. */
  kvc_stateful_t *stateful = NULL;
  kvc_stateful_options_t so = KVC_STATEFUL_OPTIONS_INIT;
  so.batch = 1;
  assert_fails(kvc_stateful_create(c, &so, &stateful), KVC_ERR_UNSUPPORTED,
               "the stateful mode has no remote tier");
  if ((kvc_features() & KVC_FEATURE_REDIS) == 0) {
    /* A build without hiredis says so at create, optional or not. */
    assert_fails(kvc_cache_create(c, &cache), KVC_ERR_UNSUPPORTED,
                 "remote tier: built without hiredis: install libhiredis-dev and rebuild");
    ok(kvc_config_set_remote_cache_optional(c, true));
    assert_fails(kvc_cache_create(c, &cache), KVC_ERR_UNSUPPORTED, "built without hiredis");
    ok(kvc_config_set_remote_cache_optional(c, false));
  }
  ok(kvc_config_set_block_reuse(c, false));
  assert_fails(kvc_cache_create(c, &cache), KVC_ERR_INVALID_ARGUMENT,
               "the remote cache needs block reuse, which is off");
  kvc_config_destroy(c);
}

static void refusals_at_create(void **state) {
  (void)state;
  NEED_SERVER();
  kvc_cache_t *cache = NULL;
  /* Budget below one record (192 + 128 bytes). */
  kvc_config_t *c = rt_config(server.url, 4);
  ok(kvc_config_set_remote_cache(c, server.url, NULL, 100));
  assert_fails(kvc_cache_create(c, &cache), KVC_ERR_INVALID_ARGUMENT,
               "remote cache bytes 100 is below one block record (320 bytes");
  kvc_config_destroy(c);

  /* A server that wants a password. */
  kvc_test_redis locked;
  assert_int_equal(kvc_test_redis_start(&locked, "s3cret"), 0);
  char url[128];
  snprintf(url, sizeof url, "redis://:wrong@127.0.0.1:%d/0", locked.port);
  c = rt_config(url, 4);
  assert_fails(kvc_cache_create(c, &cache), KVC_ERR_INVALID_ARGUMENT,
               "AUTH refused: WRONGPASS");
  assert_null(strstr(kvc_last_error_message(), "wrong"));
  /* Optional: created anyway, the failures counted. */
  ok(kvc_config_set_remote_cache_optional(c, true));
  cache = create(c);
  kvc_tier_stats_t s = remote_stats(cache);
  assert_true(s.errors >= 1);
  kvc_cache_destroy(cache);
  kvc_config_destroy(c);

  /* Nothing listening. */
  const int port = locked.port;
  kvc_test_redis_stop(&locked);
  snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", port);
  c = rt_config(url, 4);
  ok(kvc_config_set_remote_cache_timeouts(c, 500, 500));
  assert_fails(kvc_cache_create(c, &cache), KVC_ERR_DEVICE, "cannot connect within 500 ms");
  kvc_config_destroy(c);
}

static void another_process_computes_this_one_reuses(void **state) {
  (void)state;
  NEED_SERVER();
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    execl(KVC_REMOTE_TIER_PEER, KVC_REMOTE_TIER_PEER, server.url, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);

  kvc_config_t *c = rt_config(server.url, 4);
  kvc_cache_t *cache = create(c);
  kvc_config_destroy(c);
  int32_t a[13];
  for (int i = 0; i < 13; ++i) a[i] = 100 + i;
  /* The peer's 3 blocks, checked bit for bit by rt_cache_prompt. */
  assert_int_equal(rt_cache_prompt(cache, 1, a, 13, NULL), 12);
  kvc_tier_stats_t s = remote_stats(cache);
  assert_int_equal(s.tier, KVC_TIER_REMOTE);
  assert_int_equal(s.onboarded_blocks, 3);
  assert_int_equal(s.onboarded_bytes, 3 * 2 * RT_T * 4 * 4);
  assert_int_equal(s.hits, 3);
  assert_int_equal(s.rejected, 0);
  assert_int_equal(s.errors, 0);
  assert_int_equal(s.capacity_bytes, 1 << 20);
  assert_true(s.load_count >= 1);
  kvc_cache_destroy(cache);
}

static void salts_never_meet(void **state) {
  (void)state;
  NEED_SERVER();
  int32_t a[13], b[16];
  for (int i = 0; i < 13; ++i) a[i] = 5000 + i;
  for (int i = 0; i < 16; ++i) b[i] = 7000 + i;
  kvc_config_t *c = rt_config(server.url, 4);
  kvc_cache_t *first = create(c);
  assert_int_equal(rt_cache_prompt(first, 1, a, 13, "tenant-a"), 0);
  assert_int_equal(rt_cache_prompt(first, 2, b, 16, NULL), 0); /* a -> Redis */
  assert_int_equal(remote_stats(first).stored_blocks, 7); /* a and b, at commit */
  kvc_cache_destroy(first);

  kvc_cache_t *second = create(c);
  kvc_config_destroy(c);
  assert_int_equal(rt_cache_prompt(second, 1, a, 13, "tenant-b"), 0);
  assert_int_equal(rt_cache_prompt(second, 2, a, 13, NULL), 0);
  assert_int_equal(remote_stats(second).onboarded_blocks, 0);
  assert_int_equal(rt_cache_prompt(second, 3, a, 13, "tenant-a"), 12);
  assert_int_equal(remote_stats(second).onboarded_blocks, 3);
  kvc_cache_destroy(second);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(settings_and_errors),
      cmocka_unit_test(refusals_at_create),
      cmocka_unit_test(another_process_computes_this_one_reuses),
      cmocka_unit_test(salts_never_meet),
  };
  return cmocka_run_group_tests(tests, start_server, stop_server);
}
