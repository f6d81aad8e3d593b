// The optional native relay: once the TypeScript side has detected and routed a passthrough
// connection, this dials the upstream and relays the bytes both ways for the rest of the
// connection's life on one epoll thread, without a trip into JavaScript for the connect's
// completion, or per read, write, shutdown or close. It parses nothing: it connects, moves
// bytes between two sockets and reports the end once.
//
// Dialing: dial() runs on the main thread up to a non-blocking connect(2) (an immediate failure
// is thrown at once, as the TypeScript dial reports it); this thread waits for the connect to
// finish (EPOLLOUT, then SO_ERROR), with the dial timeout, before relaying. A failed or timed-out
// connect is reported like any end, marked as a dial, so the TypeScript side gives it the same
// codes as its own dial (GATE_ERR_DIAL_*).
//
// Ownership: dial() duplicates the client's descriptor (F_DUPFD_CLOEXEC) and the caller closes
// its handle right after; the upstream socket is created here. So the descriptors here are owned
// by this thread alone: a close on the JavaScript side can never let this side write into a
// descriptor number the process has meanwhile reused for another connection, and the other way
// round.
//
// Per connection and direction: bytes read from `src` are written to `dst`. A read lands in
// the engine's one scratch buffer and is written at once; only what the destination did not
// take is copied into a buffer the direction owns until it is written (backpressure: nothing
// more is read from `src` meanwhile). An idle connection therefore holds no buffer at all.
// A FIN is passed on with shutdown(SHUT_WR) (half-close); the connection ends when both
// directions have passed their FIN on, or at the first error, which closes both sockets.
//
// With `splice` (dial's argument) a direction moves its bytes through a pipe with
// splice(2) instead of recv/send through the scratch buffer: socket → pipe → socket, the bytes
// never copied into this process. A pipe is taken from a small engine-wide pool when a direction
// reads and given back as soon as it is empty again, so, as with the scratch buffer, only a
// direction whose destination is not keeping up holds one (two descriptors, and the pages of
// what it holds); an idle connection holds none. When no pipe can be had (the descriptor limit)
// the direction reads into the scratch buffer instead, for that turn.
#include <napi.h>

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

constexpr size_t kScratchSize = 64 * 1024;
// Edge-triggered epoll reports readiness once: a connection must be pumped until EAGAIN or it
// is never told again. To keep one bulk transfer from starving every other connection, a pump
// stops after this many reads and the connection is pumped again after the others' events.
constexpr int kReadsPerTurn = 16;
constexpr int kSweepEveryMs = 250;
constexpr uint64_t kWakeToken = ~uint64_t{0};
// An epoll token is the connection id and, above it, which of its sockets reported (so only the
// directions that socket concerns are pumped, not both until EAGAIN on every event).
constexpr uint64_t kClientSocket = uint64_t{1} << 32;
constexpr uint64_t kUpstreamSocket = uint64_t{2} << 32;
// Empty pipes kept for the next direction that reads (two descriptors each); more are closed.
constexpr size_t kSparePipes = 32;

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

/** `ECONNRESET` for ECONNRESET: the names the TypeScript relay reports (libuv's, the same on Linux). */
const char* ErrnoName(int err) {
  const char* name = strerrorname_np(err);  // glibc 2.32+
  return name != nullptr ? name : "EIO";
}

enum class Side { kNone, kClient, kUpstream };

struct Direction {
  int src = -1;
  int dst = -1;
  Side srcSide = Side::kNone;
  Side dstSide = Side::kNone;
  std::unique_ptr<char[]> pending;  // bytes read from src that dst has not taken yet
  size_t pendingOffset = 0;
  size_t pendingLength = 0;
  bool splice = false;  // move bytes with splice(2) through a pipe instead of the scratch buffer
  int pipeRead = -1;    // the pipe while it holds bytes (splice only); -1 otherwise
  int pipeWrite = -1;
  size_t piped = 0;  // bytes in the pipe that dst has not taken yet
  bool srcEnded = false;
  bool finSent = false;
  uint64_t bytesRead = 0;
};

struct Connection {
  uint32_t id = 0;
  int client = -1;
  int upstream = -1;
  Direction toUpstream;
  Direction toClient;
  int64_t idleMs = 0;
  int64_t lastActive = 0;
  uint64_t clientWritten = 0;
  bool connecting = false;  // the upstream's connect(2) has not finished yet
  int64_t dialTimeoutMs = 0;
  int64_t dialDeadline = 0;
};

struct Outcome {
  std::string code;  // "" when both sides ended cleanly
  Side side = Side::kNone;
  bool dial = false;  // the upstream's connect failed or timed out
};

/** What JavaScript is told once per connection. */
struct Ended {
  uint32_t id;
  std::string code;
  Side side;
  bool dial;
  double clientRead;
  double clientWritten;
};

struct Command {
  enum Kind { kStart, kDestroy, kStop } kind;
  std::unique_ptr<Connection> connection;
  uint32_t id = 0;
};

class Engine {
 public:
  Engine(Napi::Env env, Napi::Function onEnd) {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_ < 0 || wake_ < 0) {
      Napi::Error::New(env, std::string("native relay: ") + strerror(errno)).ThrowAsJavaScriptException();
      return;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWakeToken;
    epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
    onEnd_ = Napi::ThreadSafeFunction::New(env, onEnd, "gate-mux native relay", 0, 1);
    // Not holding the event loop open by itself: JavaScript refs it while connections run.
    onEnd_.Unref(env);
    thread_ = std::thread([this] { Run(); });
    // Stop before Node tears the thread-safe function down. Cleanup hooks run last-registered
    // first, so this runs before the function's own hook. Stopping later, from the instance
    // data's finalizer, deadlocks on Node 24: that finalizer runs while Node holds the
    // function's lock, and releasing the function takes the same lock.
    env_ = env;
    napi_add_env_cleanup_hook(env, StopHook, this);
    hooked_ = true;
  }

  ~Engine() {
    if (hooked_) napi_remove_env_cleanup_hook(env_, StopHook, this);
    Stop();
  }

  bool ok() const { return thread_.joinable(); }

  /**
   * Main thread: takes a duplicate of the client, opens the upstream socket and starts its
   * connect; returns the connection id. 0 with `*dialFailed` false: the client could not be
   * taken (errno set; nothing changed). 0 with `*dialFailed` true: the connect failed at once
   * (errno set, the dial's error).
   */
  uint32_t Dial(int clientFd, const std::string& address, int port, bool ipv6, const uint8_t* initial, size_t initialLength, int64_t idleMs,
                bool splice, int64_t dialTimeoutMs, bool* dialFailed) {
    *dialFailed = false;
    sockaddr_storage to{};
    socklen_t toLength;
    if (ipv6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&to);
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons(static_cast<uint16_t>(port));
      if (inet_pton(AF_INET6, address.c_str(), &in6->sin6_addr) != 1) return (errno = EINVAL), 0;
      toLength = sizeof *in6;
    } else {
      auto* in4 = reinterpret_cast<sockaddr_in*>(&to);
      in4->sin_family = AF_INET;
      in4->sin_port = htons(static_cast<uint16_t>(port));
      if (inet_pton(AF_INET, address.c_str(), &in4->sin_addr) != 1) return (errno = EINVAL), 0;
      toLength = sizeof *in4;
    }
    int client = fcntl(clientFd, F_DUPFD_CLOEXEC, 0);
    if (client < 0) return 0;
    // O_NONBLOCK belongs to the open file, shared with libuv's descriptor, which has it; set it
    // only if it is missing, so this thread can never block on a read whoever opened the socket.
    int flags = fcntl(client, F_GETFL);
    if (flags >= 0 && (flags & O_NONBLOCK) == 0) fcntl(client, F_SETFL, flags | O_NONBLOCK);
    int upstream = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (upstream < 0) {
      int saved = errno;
      close(client);
      errno = saved;
      return 0;
    }
    int one = 1;
    setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int r;
    do {
      r = connect(upstream, reinterpret_cast<sockaddr*>(&to), toLength);
    } while (r < 0 && errno == EINTR);
    if (r < 0 && errno != EINPROGRESS) {
      int saved = errno;
      close(upstream);
      close(client);
      errno = saved;
      *dialFailed = true;
      return 0;
    }
    return Start(client, upstream, initial, initialLength, idleMs, splice, r < 0 ? dialTimeoutMs : -1);
  }

 private:
  /** Main thread: a connection on descriptors owned here; dialTimeoutMs >= 0 while its connect runs. */
  uint32_t Start(int client, int upstream, const uint8_t* initial, size_t initialLength, int64_t idleMs, bool splice, int64_t dialTimeoutMs) {
    auto c = std::make_unique<Connection>();
    c->connecting = dialTimeoutMs >= 0;
    c->dialTimeoutMs = dialTimeoutMs;
    c->id = ++lastId_;
    if (c->id == 0) c->id = ++lastId_;  // 0 means failure to the caller
    c->client = client;
    c->upstream = upstream;
    c->toUpstream.src = client;
    c->toUpstream.dst = upstream;
    c->toUpstream.srcSide = Side::kClient;
    c->toUpstream.dstSide = Side::kUpstream;
    c->toClient.src = upstream;
    c->toClient.dst = client;
    c->toClient.srcSide = Side::kUpstream;
    c->toClient.dstSide = Side::kClient;
    c->idleMs = idleMs;
    c->toUpstream.splice = splice;
    c->toClient.splice = splice;
    if (initialLength > 0) {
      // The peeked bytes (and a PROXY header) go out first, before anything read here.
      c->toUpstream.pending.reset(new char[initialLength]);
      memcpy(c->toUpstream.pending.get(), initial, initialLength);
      c->toUpstream.pendingLength = initialLength;
    }
    uint32_t id = c->id;
    Send(Command{Command::kStart, std::move(c), 0});
    return id;
  }

 public:
  void Destroy(uint32_t id) { Send(Command{Command::kDestroy, nullptr, id}); }

  void Ref(Napi::Env env) { onEnd_.Ref(env); }
  void Unref(Napi::Env env) { onEnd_.Unref(env); }

  static void StopHook(void* engine) { static_cast<Engine*>(engine)->Stop(); }

  void Stop() {
    hooked_ = false;  // run once, from the hook or the destructor
    if (!thread_.joinable()) return;
    Send(Command{Command::kStop, nullptr, 0});
    thread_.join();
    for (auto& pipe : sparePipes_) {
      close(pipe.first);
      close(pipe.second);
    }
    sparePipes_.clear();
    onEnd_.Release();
    close(wake_);
    close(epoll_);
  }

 private:
  void Send(Command command) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      commands_.push_back(std::move(command));
    }
    uint64_t one = 1;
    while (write(wake_, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }

  void Run() {
    std::vector<epoll_event> events(256);
    std::vector<uint32_t> again;
    int64_t lastSweep = NowMs();
    for (;;) {
      again.swap(pumpAgain_);
      pumpAgain_.clear();
      int timeout = !again.empty() ? 0 : idleWatched_ > 0 ? kSweepEveryMs : -1;
      if (timeout != 0 && !dialDeadlines_.empty()) {
        int64_t untilDeadline = dialDeadlines_.begin()->first - NowMs();
        int dialWait = untilDeadline <= 0 ? 0 : static_cast<int>(untilDeadline < kSweepEveryMs ? untilDeadline : kSweepEveryMs);
        timeout = timeout < 0 ? dialWait : (dialWait < timeout ? dialWait : timeout);
      }
      int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), timeout);
      if (n < 0 && errno != EINTR) return;
      bool stop = false;
      for (int i = 0; i < n; i++) {
        uint64_t token = events[i].data.u64;
        if (token == kWakeToken) {
          uint64_t count;
          while (read(wake_, &count, sizeof count) > 0) {
          }
          stop = TakeCommands() || stop;
          continue;
        }
        PumpFor(static_cast<uint32_t>(token), token & kClientSocket ? Side::kClient : Side::kUpstream, events[i].events);
      }
      // Connections that used up their turn: their sockets may still hold bytes, and an
      // edge-triggered epoll will not say so again.
      for (uint32_t id : again) Pump(id);
      if (!dialDeadlines_.empty()) {
        int64_t now = NowMs();
        while (!dialDeadlines_.empty() && dialDeadlines_.begin()->first <= now) {
          uint32_t id = dialDeadlines_.begin()->second;
          dialDeadlines_.erase(dialDeadlines_.begin());
          Finish(id, Outcome{"DIAL_TIMEOUT", Side::kUpstream, true}, true);
        }
      }
      if (idleWatched_ > 0) {
        int64_t now = NowMs();
        if (now - lastSweep >= kSweepEveryMs) {
          lastSweep = now;
          Sweep(now);
        }
      }
      if (stop) {
        std::vector<uint32_t> ids;
        for (auto& entry : connections_) ids.push_back(entry.first);
        for (uint32_t id : ids) Finish(id, Outcome{"DESTROYED", Side::kNone}, false);
        return;
      }
    }
  }

  /** Returns true on kStop. */
  bool TakeCommands() {
    std::deque<Command> batch;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      batch.swap(commands_);
    }
    bool stop = false;
    for (Command& command : batch) {
      switch (command.kind) {
        case Command::kStart: {
          Connection* c = command.connection.get();
          uint32_t id = c->id;
          c->lastActive = NowMs();
          if (c->idleMs > 0) idleWatched_++;
          if (c->connecting && c->dialTimeoutMs > 0) {
            c->dialDeadline = c->lastActive + c->dialTimeoutMs;
            dialDeadlines_.emplace(c->dialDeadline, id);
          }
          connections_.emplace(id, std::move(command.connection));
          // Both sockets, both ways, edge-triggered: one registration for the connection's life.
          epoll_event ev{};
          ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
          ev.data.u64 = id | kClientSocket;
          epoll_event upstreamEv = ev;
          upstreamEv.data.u64 = id | kUpstreamSocket;
          if (epoll_ctl(epoll_, EPOLL_CTL_ADD, c->client, &ev) < 0 || epoll_ctl(epoll_, EPOLL_CTL_ADD, c->upstream, &upstreamEv) < 0) {
            Finish(id, Outcome{ErrnoName(errno), Side::kNone}, true);
            break;
          }
          Pump(id);  // the initial bytes, and whatever arrived before registration
          break;
        }
        case Command::kDestroy:
          Finish(command.id, Outcome{"DESTROYED", Side::kNone}, true);
          break;
        case Command::kStop:
          stop = true;
          break;
      }
    }
    return stop;
  }

  /**
   * An event of one socket: the direction it is the source of when it has something to read (or
   * failed), and the direction it is the destination of only when that one waits for it with
   * bytes in hand. Edge-triggered events carry every ready bit (a readable socket is usually
   * writable too), so writability alone must not pump a direction that has nothing to write.
   */
  void PumpFor(uint32_t id, Side socket, uint32_t events) {
    auto found = connections_.find(id);
    if (found == connections_.end()) return;  // ended while its event was queued
    Connection& c = *found->second;
    Direction& to = socket == Side::kClient ? c.toClient : c.toUpstream;
    bool pumpFrom = (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
    bool pumpTo = (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0 && (to.pendingLength > 0 || to.piped > 0);
    if (c.connecting || (pumpFrom && pumpTo)) return Pump(id);
    if (pumpFrom || pumpTo) Pump(id, socket == Side::kClient ? pumpFrom : pumpTo, socket == Side::kClient ? pumpTo : pumpFrom);
  }

  void Pump(uint32_t id, bool toUpstream = true, bool toClient = true) {
    auto found = connections_.find(id);
    if (found == connections_.end()) return;  // ended while its event was queued
    Connection& c = *found->second;
    if (c.connecting) {
      if (!Connected(c)) return;
      toUpstream = toClient = true;  // whatever either side sent while the connect ran
    }
    bool more = false;
    Outcome outcome;
    if ((toUpstream && !PumpDirection(c, c.toUpstream, &outcome, &more)) || (toClient && !PumpDirection(c, c.toClient, &outcome, &more))) {
      Finish(id, outcome, true);
      return;
    }
    if (c.toUpstream.finSent && c.toClient.finSent) {
      Finish(id, Outcome{}, true);
      return;
    }
    if (more) pumpAgain_.push_back(id);
  }

  /**
   * Whether the upstream's connect has finished; on a failure the connection ends here as a dial
   * failure. Events of the client while the connect runs wait for it: edge-triggered, they are
   * not repeated, but the first pump after the connect reads the client until EAGAIN anyway.
   */
  bool Connected(Connection& c) {
    int err = 0;
    socklen_t length = sizeof err;
    if (getsockopt(c.upstream, SOL_SOCKET, SO_ERROR, &err, &length) < 0) err = errno;
    if (err == 0) {
      sockaddr_storage peer;
      socklen_t peerLength = sizeof peer;
      if (getpeername(c.upstream, reinterpret_cast<sockaddr*>(&peer), &peerLength) == 0) {
        c.connecting = false;
        if (c.dialDeadline > 0) dialDeadlines_.erase({c.dialDeadline, c.id});
        c.lastActive = NowMs();
        return true;
      }
      if (errno == ENOTCONN) return false;  // still connecting: an event of the client
      err = errno;
    }
    Finish(c.id, Outcome{ErrnoName(err), Side::kUpstream, true}, true);
    return false;
  }

  /** Moves what it can from d.src to d.dst; false on an error (then `outcome` says which). */
  bool PumpDirection(Connection& c, Direction& d, Outcome* outcome, bool* more) {
    for (int reads = 0;;) {
      if (d.pendingLength > 0) {
        ssize_t w = send(d.dst, d.pending.get() + d.pendingOffset, d.pendingLength, MSG_NOSIGNAL);
        if (w < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return true;  // EPOLLOUT resumes it
          *outcome = Outcome{ErrnoName(errno), d.dstSide};
          return false;
        }
        Wrote(c, d, static_cast<size_t>(w));
        d.pendingOffset += static_cast<size_t>(w);
        d.pendingLength -= static_cast<size_t>(w);
        if (d.pendingLength > 0) continue;
        d.pending.reset();
        d.pendingOffset = 0;
      }
      if (d.piped > 0) {
        ssize_t w = splice(d.pipeRead, nullptr, d.dst, nullptr, d.piped, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (w < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) return true;  // EPOLLOUT resumes it
          *outcome = Outcome{ErrnoName(errno), d.dstSide};
          return false;
        }
        Wrote(c, d, static_cast<size_t>(w));
        d.piped -= static_cast<size_t>(w);
        if (d.piped > 0) continue;
        ReleasePipe(d);
      }
      if (d.srcEnded) {
        if (!d.finSent) {
          d.finSent = true;
          if (shutdown(d.dst, SHUT_WR) < 0 && errno != ENOTCONN) {
            *outcome = Outcome{ErrnoName(errno), d.dstSide};
            return false;
          }
        }
        return true;
      }
      if (reads++ == kReadsPerTurn) {
        *more = true;
        return true;
      }
      if (d.splice && TakePipe(d)) {
        // The pipe is empty here, so EAGAIN can only mean that src has nothing to read.
        ssize_t r = splice(d.src, nullptr, d.pipeWrite, nullptr, kScratchSize, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (r <= 0) {
          int err = errno;
          ReleasePipe(d);
          if (r == 0) {
            d.srcEnded = true;
            continue;
          }
          if (err == EINTR) continue;
          if (err == EAGAIN || err == EWOULDBLOCK) return true;
          *outcome = Outcome{ErrnoName(err), d.srcSide};
          return false;
        }
        d.bytesRead += static_cast<uint64_t>(r);
        c.lastActive = NowMs();
        d.piped = static_cast<size_t>(r);
        continue;  // out to dst at the top of the loop
      }
      ssize_t r = recv(d.src, scratch_, kScratchSize, 0);
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
        *outcome = Outcome{ErrnoName(errno), d.srcSide};
        return false;
      }
      if (r == 0) {
        d.srcEnded = true;
        continue;
      }
      d.bytesRead += static_cast<uint64_t>(r);
      c.lastActive = NowMs();
      ssize_t w = send(d.dst, scratch_, static_cast<size_t>(r), MSG_NOSIGNAL);
      if (w < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          *outcome = Outcome{ErrnoName(errno), d.dstSide};
          return false;
        }
        w = 0;
      }
      Wrote(c, d, static_cast<size_t>(w));
      if (w < r) {
        size_t rest = static_cast<size_t>(r - w);
        d.pending.reset(new char[rest]);
        memcpy(d.pending.get(), scratch_ + w, rest);
        d.pendingOffset = 0;
        d.pendingLength = rest;
      }
    }
  }

  /** Gives `d` an empty pipe (spare or new); false when none can be had (the descriptor limit). */
  bool TakePipe(Direction& d) {
    if (d.pipeRead >= 0) return true;
    if (!sparePipes_.empty()) {
      d.pipeRead = sparePipes_.back().first;
      d.pipeWrite = sparePipes_.back().second;
      sparePipes_.pop_back();
      return true;
    }
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) return false;
    d.pipeRead = fds[0];
    d.pipeWrite = fds[1];
    return true;
  }

  /** Returns `d`'s pipe to the spares, or closes it: only when it is empty, or the connection ends. */
  void ReleasePipe(Direction& d) {
    if (d.pipeRead < 0) return;
    if (d.piped == 0 && sparePipes_.size() < kSparePipes) {
      sparePipes_.emplace_back(d.pipeRead, d.pipeWrite);
    } else {
      // Bytes still in it belong to a connection that is ending: they go with the pipe.
      close(d.pipeRead);
      close(d.pipeWrite);
    }
    d.pipeRead = d.pipeWrite = -1;
    d.piped = 0;
  }

  void Wrote(Connection& c, Direction& d, size_t n) {
    if (n == 0) return;
    c.lastActive = NowMs();
    if (d.dstSide == Side::kClient) c.clientWritten += n;
  }

  void Sweep(int64_t now) {
    std::vector<uint32_t> idle;
    for (auto& entry : connections_) {
      Connection& c = *entry.second;
      if (c.idleMs > 0 && !c.connecting && now - c.lastActive >= c.idleMs) idle.push_back(entry.first);
    }
    for (uint32_t id : idle) Finish(id, Outcome{"IDLE", Side::kNone}, true);
  }

  void Finish(uint32_t id, const Outcome& outcome, bool report) {
    auto found = connections_.find(id);
    if (found == connections_.end()) return;
    std::unique_ptr<Connection> c = std::move(found->second);
    connections_.erase(found);
    if (c->idleMs > 0) idleWatched_--;
    if (c->connecting && c->dialDeadline > 0) dialDeadlines_.erase({c->dialDeadline, id});
    for (int fd : {c->client, c->upstream}) {
      epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
      close(fd);
    }
    ReleasePipe(c->toUpstream);
    ReleasePipe(c->toClient);
    auto* ended = new Ended{id, outcome.code, outcome.side, outcome.dial, static_cast<double>(c->toUpstream.bytesRead), static_cast<double>(c->clientWritten)};
    if (!report || onEnd_.NonBlockingCall(ended, Deliver) != napi_ok) delete ended;
  }

  static void Deliver(Napi::Env env, Napi::Function onEnd, Ended* ended) {
    std::unique_ptr<Ended> owned(ended);
    if (env == nullptr || onEnd == nullptr) return;
    const char* side = ended->side == Side::kClient ? "client" : ended->side == Side::kUpstream ? "upstream" : "";
    onEnd.Call({Napi::Number::New(env, ended->id), Napi::String::New(env, ended->code), Napi::String::New(env, side),
                Napi::Number::New(env, ended->clientRead), Napi::Number::New(env, ended->clientWritten), Napi::Boolean::New(env, ended->dial)});
  }

  int epoll_ = -1;
  int wake_ = -1;
  napi_env env_ = nullptr;
  bool hooked_ = false;
  uint32_t lastId_ = 0;  // main thread only
  Napi::ThreadSafeFunction onEnd_;
  std::thread thread_;
  std::mutex mutex_;
  std::deque<Command> commands_;
  // Engine thread only:
  std::unordered_map<uint32_t, std::unique_ptr<Connection>> connections_;
  int idleWatched_ = 0;
  std::vector<uint32_t> pumpAgain_;  // connections to pump again on the next turn
  std::set<std::pair<int64_t, uint32_t>> dialDeadlines_;  // (deadline, id) of connects still running
  std::vector<std::pair<int, int>> sparePipes_;  // empty pipes (read end, write end), splice only
  char scratch_[kScratchSize];
};

class Addon : public Napi::Addon<Addon> {
 public:
  Addon(Napi::Env env, Napi::Object exports) {
    DefineAddon(exports, {
                             InstanceMethod("start", &Addon::Start),
                             InstanceMethod("dial", &Addon::Dial),
                             InstanceMethod("destroy", &Addon::Destroy),
                             InstanceMethod("ref", &Addon::Ref),
                             InstanceMethod("unref", &Addon::Unref),
                         });
  }

  ~Addon() { engine_.reset(); }

 private:
  /** start(onEnd(id, code, side, clientRead, clientWritten)): once per process. */
  Napi::Value Start(const Napi::CallbackInfo& info) {
    if (engine_) return info.Env().Undefined();
    if (info.Length() < 1 || !info[0].IsFunction()) throw Napi::TypeError::New(info.Env(), "start(onEnd)");
    engine_ = std::make_unique<Engine>(info.Env(), info[0].As<Napi::Function>());
    if (!engine_->ok()) engine_.reset();
    return info.Env().Undefined();
  }

  /**
   * dial(clientFd, address, port, ipv6, initial: Buffer | null, idleMs, splice, dialTimeoutMs): id.
   * Throws with the errno name; `dial` on the error is true when the connect itself failed.
   */
  Napi::Value Dial(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!engine_) throw Napi::Error::New(env, "native relay not started");
    if (info.Length() < 8 || !info[0].IsNumber() || !info[1].IsString() || !info[2].IsNumber() || !info[5].IsNumber() || !info[7].IsNumber())
      throw Napi::TypeError::New(env, "dial(clientFd, address, port, ipv6, initial, idleMs, splice, dialTimeoutMs)");
    const uint8_t* data = nullptr;
    size_t length = 0;
    if (info[4].IsBuffer()) {
      auto buffer = info[4].As<Napi::Buffer<uint8_t>>();
      data = buffer.Data();
      length = buffer.Length();
    }
    bool dialFailed = false;
    uint32_t id = engine_->Dial(info[0].As<Napi::Number>().Int32Value(), info[1].As<Napi::String>().Utf8Value(), info[2].As<Napi::Number>().Int32Value(),
                                info[3].ToBoolean().Value(), data, length, info[5].As<Napi::Number>().Int64Value(), info[6].ToBoolean().Value(),
                                info[7].As<Napi::Number>().Int64Value(), &dialFailed);
    if (id == 0) {
      Napi::Error error = Napi::Error::New(env, ErrnoName(errno));
      error.Set("dial", Napi::Boolean::New(env, dialFailed));
      throw error;
    }
    return Napi::Number::New(env, id);
  }

  Napi::Value Destroy(const Napi::CallbackInfo& info) {
    if (engine_ && info.Length() > 0 && info[0].IsNumber()) engine_->Destroy(info[0].As<Napi::Number>().Uint32Value());
    return info.Env().Undefined();
  }

  Napi::Value Ref(const Napi::CallbackInfo& info) {
    if (engine_) engine_->Ref(info.Env());
    return info.Env().Undefined();
  }

  Napi::Value Unref(const Napi::CallbackInfo& info) {
    if (engine_) engine_->Unref(info.Env());
    return info.Env().Undefined();
  }

  std::unique_ptr<Engine> engine_;
};

}  // namespace

NODE_API_ADDON(Addon)
