// RedisConnection: hiredis's blocking context, driven by hand for round
// trips (poll before every read and write) so that a whole pipeline, not
// each system call, is bounded by the deadline.
#include "store/redis_connection.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "store/host_resolver.h"

namespace kvc {

namespace {

timeval to_timeval(std::chrono::microseconds t) {
  if (t.count() < 1) t = std::chrono::microseconds(1);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000000);
  tv.tv_usec = static_cast<suseconds_t>(t.count() % 1000000);
  return tv;
}

std::string ms(std::chrono::milliseconds t) { return std::to_string(t.count()) + " ms"; }

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// One command at connect time; a broken connection or an error reply
// throws with `what` and the server's words.
ReplyPtr setup_command(redisContext* ctx, const RedisUrl& url, const std::string& what,
                       std::initializer_list<RedisArg> args, kvc_status_t refusal_status,
                       const std::string& hint) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const RedisArg& a : args) {
    argv.push_back(a.data);
    lens.push_back(a.size);
  }
  ReplyPtr reply(static_cast<redisReply*>(
      redisCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data())));
  if (!reply) {
    fail(KVC_ERR_DEVICE, "remote tier " + url.display() + ": no answer to " + what + ": " +
                             (ctx->err ? ctx->errstr : "connection lost"));
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    fail(refusal_status, "remote tier " + url.display() + ": " + what + " refused: " +
                             std::string(reply->str, reply->len) + hint);
  }
  return reply;
}

}  // namespace

bool redis_built() { return true; }
const char* const kRedisUnavailableMessage = "";

RedisArg::RedisArg(const char* s) : data(s), size(std::strlen(s)) {}

std::unique_ptr<RedisConnection> RedisConnection::open(const RedisUrl& url,
                                                       std::chrono::milliseconds connect_timeout,
                                                       std::chrono::milliseconds command_timeout) {
  // The name first, within the connect timeout (hiredis's own lookup has
  // none); then the connection, within it again.
  const Resolved host = resolve_host(url.host, connect_timeout);
  if (!host.ok)
    fail(KVC_ERR_DEVICE, "remote tier " + url.display() + ": cannot resolve '" + url.host + "': " +
                             host.error);
  redisContext* ctx = redisConnectWithTimeout(host.address.c_str(), url.port,
                                              to_timeval(connect_timeout));
  if (ctx == nullptr) fail(KVC_ERR_OUT_OF_MEMORY, "remote tier: no memory for a connection");
  std::unique_ptr<RedisConnection> conn(new RedisConnection(ctx));
  if (ctx->err) {
    fail(KVC_ERR_DEVICE, "remote tier " + url.display() + ": cannot connect within " +
                             ms(connect_timeout) + ": " + ctx->errstr);
  }
  redisSetTimeout(ctx, to_timeval(command_timeout));
  if (url.has_password) {
    const std::string hint = " (check the user and password of the URL)";
    if (url.user.empty()) {
      setup_command(ctx, url, "AUTH", {"AUTH", url.password}, KVC_ERR_INVALID_ARGUMENT, hint);
    } else {
      setup_command(ctx, url, "AUTH", {"AUTH", url.user, url.password},
                    KVC_ERR_INVALID_ARGUMENT, hint);
    }
  }
  if (url.db != 0) {
    const std::string db = std::to_string(url.db);
    setup_command(ctx, url, "SELECT " + db, {"SELECT", db}, KVC_ERR_INVALID_ARGUMENT,
                  " (the server's 'databases' setting bounds the database number)");
  }
  setup_command(ctx, url, "PING", {"PING"}, KVC_ERR_INVALID_ARGUMENT,
                url.has_password ? "" : " (give the password in the URL: redis://:password@host:port/db)");
  return conn;
}

RedisConnection::~RedisConnection() { redisFree(ctx_); }

void RedisConnection::append(std::initializer_list<RedisArg> args) {
  append(args.begin(), args.size());
}

void RedisConnection::append(const RedisArg* args, size_t n) {
  const char* argv[8];
  size_t lens[8];
  if (n > 8) fail(KVC_ERR_INTERNAL, "RedisConnection::append: more than 8 arguments");
  for (size_t i = 0; i < n; ++i) {
    argv[i] = args[i].data;
    lens[i] = args[i].size;
  }
  if (redisAppendCommandArgv(ctx_, static_cast<int>(n), argv, lens) != REDIS_OK) {
    throw std::bad_alloc();
  }
  ++pending_;
}

bool RedisConnection::break_with(const std::string& why, std::string* error) {
  broken_ = true;
  pending_ = 0;
  if (error != nullptr) *error = why;
  return false;
}

bool RedisConnection::wait_fd(short events, RedisClock::time_point deadline, std::string* error) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - RedisClock::now());
    if (left.count() <= 0) return break_with("timed out", error);
    pollfd p{ctx_->fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r > 0) return true;
    if (r == 0) return break_with("timed out", error);
    if (errno != EINTR) return break_with(std::string("poll: ") + std::strerror(errno), error);
  }
}

bool RedisConnection::send_pending(RedisClock::time_point deadline, std::string* error) {
  if (broken_) return break_with("connection broken", error);
  // Each write may block only until the deadline (SO_SNDTIMEO).
  int done = 0;
  while (!done) {
    if (!wait_fd(POLLOUT, deadline, error)) return false;
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
        deadline - RedisClock::now());
    redisSetTimeout(ctx_, to_timeval(left));
    if (redisBufferWrite(ctx_, &done) != REDIS_OK) {
      return break_with(std::string("write: ") + ctx_->errstr, error);
    }
  }
  return true;
}

bool RedisConnection::round_trip_values(
    RedisClock::time_point deadline,
    const std::function<unsigned char*(size_t, const RedisReplyView&)>& where, size_t* complete,
    std::string* error) {
  *complete = 0;
  const size_t expected = pending_;
  if (!send_pending(deadline, error)) return false;
  for (size_t i = 0; i < expected; ++i) {
    const RespReader::Result r = reader_.read(
        ctx_->fd, deadline, [&](const RedisReplyView& v) { return where(i, v); }, error);
    if (r != RespReader::Result::kOk) return break_with(*error, error);
    --pending_;
    ++*complete;
  }
  return true;
}

bool RedisConnection::round_trip(RedisClock::time_point deadline,
                                 const std::function<void(size_t, const RedisReplyView&)>& visit,
                                 std::string* error) {
  const size_t expected = pending_;
  if (!send_pending(deadline, error)) return false;
  // Read: poll, then one read of what arrived, then every complete reply.
  size_t got = 0;
  while (got < expected) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(ctx_, &raw) != REDIS_OK) {
      return break_with(std::string("protocol: ") + ctx_->errstr, error);
    }
    if (raw == nullptr) {
      if (!wait_fd(POLLIN, deadline, error)) return false;
      if (redisBufferRead(ctx_) != REDIS_OK) {
        return break_with(std::string("read: ") + ctx_->errstr, error);
      }
      continue;
    }
    ReplyPtr reply(static_cast<redisReply*>(raw));
    RedisReplyView v;
    switch (reply->type) {
      case REDIS_REPLY_NIL: v.kind = RedisReplyView::kNil; break;
      case REDIS_REPLY_STRING: v.kind = RedisReplyView::kString; break;
      case REDIS_REPLY_STATUS: v.kind = RedisReplyView::kStatus; break;
      case REDIS_REPLY_ERROR: v.kind = RedisReplyView::kError; break;
      case REDIS_REPLY_INTEGER: v.kind = RedisReplyView::kInteger; break;
      default: v.kind = RedisReplyView::kOther; break;
    }
    if (v.kind == RedisReplyView::kString || v.kind == RedisReplyView::kStatus ||
        v.kind == RedisReplyView::kError) {
      v.data = reply->str;
      v.size = reply->len;
    }
    v.integer = reply->integer;
    --pending_;
    visit(got++, v);
  }
  return true;
}

}  // namespace kvc
