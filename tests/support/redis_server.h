/* A real redis-server for tests, on a free loopback port in a temporary
 * directory, without persistence; started, killed by pid (SIGKILL),
 * restarted on the same port and stopped by the test that owns it. C99,
 * for the cmocka and the GoogleTest suites alike (redis_server.hpp wraps
 * it for C++). Nothing listens beyond 127.0.0.1. */
#ifndef KVC_TEST_REDIS_SERVER_H
#define KVC_TEST_REDIS_SERVER_H

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kvc_test_redis {
  int port;
  pid_t pid;              /* 0: not running */
  char dir[256];          /* temporary directory: redis.log, nothing else */
  char password[64];      /* "" : none */
  char url[384];          /* redis://[:password@]127.0.0.1:port/0 */
  char why[512];          /* why the last call failed */
} kvc_test_redis;

/* The redis-server binary the tests use (KVC_REDIS_SERVER in the
 * environment, else the one found at configure time), or NULL with why in
 * *why (a static string) when there is none. */
const char* kvc_test_redis_binary(const char** why);

/* Starts a server (password: NULL or "" for none) and waits until it
 * answers PING, polling its socket in a bounded loop (10 s). Returns 0, or
 * -1 with the reason in r->why (no binary, it exited: see its log). */
int kvc_test_redis_start(kvc_test_redis* r, const char* password);
/* SIGKILL to the pid, then reaps it. 0, or -1 with r->why. */
int kvc_test_redis_kill(kvc_test_redis* r);
/* SIGSTOP / SIGCONT: a server that accepts connections and answers
 * nothing (a slow or hung server). */
int kvc_test_redis_pause(kvc_test_redis* r);
int kvc_test_redis_resume(kvc_test_redis* r);
/* Starts it again on the same port and directory (after kill). */
int kvc_test_redis_restart(kvc_test_redis* r);
/* Sends one command line (inline protocol, e.g. "CONFIG SET maxmemory 1mb")
 * and copies the first line of the reply into out. 0, or -1 with r->why. */
int kvc_test_redis_command(kvc_test_redis* r, const char* line, char* out, size_t out_size);
/* Kills the server if running and removes the directory. */
void kvc_test_redis_stop(kvc_test_redis* r);

#ifdef __cplusplus
}
#endif

#endif
