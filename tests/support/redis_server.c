/* kvc_test_redis: fork + exec of redis-server with its output in the
 * temporary directory; readiness by PING over the socket. */
#define _GNU_SOURCE
#include "redis_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef KVC_REDIS_SERVER_PATH
#define KVC_REDIS_SERVER_PATH ""
#endif

const char* kvc_test_redis_binary(const char** why) {
  const char* env = getenv("KVC_REDIS_SERVER");
  const char* path = (env != NULL && env[0] != '\0') ? env : KVC_REDIS_SERVER_PATH;
  if (path[0] == '\0') {
    if (why) *why = "no redis-server found at configure time (install redis-server: scripts/install-deps)";
    return NULL;
  }
  if (access(path, X_OK) != 0) {
    if (why) *why = "the redis-server binary is not executable (install redis-server: scripts/install-deps)";
    return NULL;
  }
  return path;
}

static int set_why(kvc_test_redis* r, const char* what) {
  snprintf(r->why, sizeof r->why, "%s", what);
  return -1;
}

/* A port the kernel just handed out on 127.0.0.1 (free a moment ago). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(fd, (struct sockaddr*)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr*)&a, &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

static int count_lines(const char* s) {
  int n = 0;
  for (const char* p = strstr(s, "\r\n"); p != NULL; p = strstr(p + 2, "\r\n")) ++n;
  return n;
}

/* One exchange on a fresh socket: sends `request`, reads until the reply
 * holds `lines` line ends. 0 with the reply in out, -1 otherwise. */
static int exchange(int port, const char* request, char* out, size_t out_size, int timeout_ms,
                    int lines) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((unsigned short)port);
  int rc = -1;
  if (connect(fd, (struct sockaddr*)&a, sizeof a) == 0) {
    size_t len = strlen(request), sent = 0;
    while (sent < len) {
      ssize_t n = write(fd, request + sent, len - sent);
      if (n <= 0) break;
      sent += (size_t)n;
    }
    size_t got = 0;
    while (sent == len && got + 1 < out_size) {
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) break;
      ssize_t n = read(fd, out + got, out_size - 1 - got);
      if (n <= 0) break;
      got += (size_t)n;
      out[got] = '\0';
      if (count_lines(out) >= lines) {
        rc = 0;
        break;
      }
    }
  }
  close(fd);
  return rc;
}

static void log_tail(kvc_test_redis* r, const char* what) {
  char path[300], buf[256] = "";
  snprintf(path, sizeof path, "%s/redis.log", r->dir);
  FILE* f = fopen(path, "r");
  if (f != NULL) {
    long size;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, size > 200 ? size - 200 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
  }
  snprintf(r->why, sizeof r->why, "%s; log tail: %s", what, buf);
}

/* Spawns the server on r->port; waits for PING. 1: it exited (maybe the
 * port was taken), -1: another failure, 0: up. */
static int spawn(kvc_test_redis* r) {
  const char* why = NULL;
  const char* bin = kvc_test_redis_binary(&why);
  if (bin == NULL) return set_why(r, why);
  char port[16], log[300];
  snprintf(port, sizeof port, "%d", r->port);
  snprintf(log, sizeof log, "%s/redis.log", r->dir);
  const char* argv[20];
  int n = 0;
  argv[n++] = bin;
  argv[n++] = "--port";
  argv[n++] = port;
  argv[n++] = "--bind";
  argv[n++] = "127.0.0.1";
  argv[n++] = "--dir";
  argv[n++] = r->dir;
  argv[n++] = "--save";
  argv[n++] = "";
  argv[n++] = "--appendonly";
  argv[n++] = "no";
  argv[n++] = "--daemonize";
  argv[n++] = "no";
  argv[n++] = "--logfile";
  argv[n++] = log;
  if (r->password[0] != '\0') {
    argv[n++] = "--requirepass";
    argv[n++] = r->password;
  }
  argv[n] = NULL;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return set_why(r, "fork failed");
  if (pid == 0) {
    /* The server dies with the test (a crashed test leaves no server). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
      dup2(nul, 0);
      dup2(nul, 1);
      dup2(nul, 2);
    }
    execv(bin, (char* const*)argv);
    _exit(127);
  }
  r->pid = pid;
  char request[160], reply[256];
  if (r->password[0] != '\0') {
    snprintf(request, sizeof request, "AUTH %s\r\nPING\r\n", r->password);
  } else {
    snprintf(request, sizeof request, "PING\r\n");
  }
  /* Bounded: 1000 tries, 10 ms apart at most. */
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      r->pid = 0;
      log_tail(r, "redis-server exited at start");
      return 1;
    }
    memset(reply, 0, sizeof reply);
    if (exchange(r->port, request, reply, sizeof reply, 1000, r->password[0] ? 2 : 1) == 0 &&
        strstr(reply, "+PONG") != NULL) {
      return 0;
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  kvc_test_redis_kill(r);
  log_tail(r, "redis-server did not answer PING within 10 s");
  return -1;
}

int kvc_test_redis_start(kvc_test_redis* r, const char* password) {
  memset(r, 0, sizeof *r);
  if (password != NULL) snprintf(r->password, sizeof r->password, "%s", password);
  const char* tmp = getenv("TMPDIR");
  snprintf(r->dir, sizeof r->dir, "%s/kvc-redis-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (mkdtemp(r->dir) == NULL) return set_why(r, "mkdtemp failed");
  for (int attempt = 0; attempt < 5; ++attempt) {
    r->port = free_port();
    if (r->port <= 0) return set_why(r, "no free loopback port");
    int rc = spawn(r);
    if (rc == 0) {
      if (r->password[0] != '\0') {
        snprintf(r->url, sizeof r->url, "redis://:%s@127.0.0.1:%d/0", r->password, r->port);
      } else {
        snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d/0", r->port);
      }
      return 0;
    }
    if (rc < 0) return -1;
    /* rc == 1: exited, most likely the port was taken meanwhile: again. */
  }
  return -1;
}

int kvc_test_redis_kill(kvc_test_redis* r) {
  if (r->pid <= 0) return set_why(r, "not running");
  kill(r->pid, SIGCONT); /* a paused server still dies, but reap cleanly */
  if (kill(r->pid, SIGKILL) != 0) return set_why(r, "kill failed");
  int status;
  while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR) {
  }
  r->pid = 0;
  return 0;
}

int kvc_test_redis_pause(kvc_test_redis* r) {
  if (r->pid <= 0 || kill(r->pid, SIGSTOP) != 0) return set_why(r, "cannot stop it");
  return 0;
}

int kvc_test_redis_resume(kvc_test_redis* r) {
  if (r->pid <= 0 || kill(r->pid, SIGCONT) != 0) return set_why(r, "cannot continue it");
  return 0;
}

int kvc_test_redis_restart(kvc_test_redis* r) {
  if (r->pid > 0) kvc_test_redis_kill(r);
  return spawn(r) == 0 ? 0 : -1;
}

int kvc_test_redis_command(kvc_test_redis* r, const char* line, char* out, size_t out_size) {
  char request[1024];
  if (r->password[0] != '\0') {
    snprintf(request, sizeof request, "AUTH %s\r\n%s\r\n", r->password, line);
  } else {
    snprintf(request, sizeof request, "%s\r\n", line);
  }
  char reply[4096];
  memset(reply, 0, sizeof reply);
  if (exchange(r->port, request, reply, sizeof reply, 5000, r->password[0] ? 2 : 1) != 0) {
    return set_why(r, "no reply");
  }
  const char* first = reply;
  if (r->password[0] != '\0') {
    /* Skip AUTH's reply. */
    const char* end = strstr(reply, "\r\n");
    first = end ? end + 2 : reply;
  }
  size_t n = strcspn(first, "\r\n");
  if (out != NULL && out_size > 0) {
    if (n >= out_size) n = out_size - 1;
    memcpy(out, first, n);
    out[n] = '\0';
  }
  return 0;
}

void kvc_test_redis_stop(kvc_test_redis* r) {
  if (r->pid > 0) kvc_test_redis_kill(r);
  if (r->dir[0] != '\0') {
    DIR* d = opendir(r->dir);
    if (d != NULL) {
      struct dirent* e;
      char path[600];
      while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", r->dir, e->d_name);
        unlink(path);
      }
      closedir(d);
    }
    rmdir(r->dir);
    r->dir[0] = '\0';
  }
}
