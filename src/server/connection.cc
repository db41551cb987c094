#include "server/connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace nanovllm::server {
namespace {

constexpr size_t kReadBuffer = 16 << 10;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(ConnClock::now().time_since_epoch()).count();
}

int ms_until(ConnClock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - ConnClock::now()).count();
  return int(std::clamp<int64_t>(left, 0, 1 << 30));
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ip.clear();
  port = 0;
  if (rc != 0 || (addr.ss_family != AF_INET && addr.ss_family != AF_INET6)) return;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

}  // namespace

Connection::Connection(int fd, const ConnLimits& limits) : fd_(fd), limits_(limits), buf_(kReadBuffer) {
  begin_request(true);
}

Connection::~Connection() {
  if (!closed_fd_) ::close(fd_);
}

void Connection::set_phase(Phase p) {
  since_ns_.store(now_ns(), std::memory_order_release);
  phase_.store(p, std::memory_order_release);
}

void Connection::begin_request(bool first) {
  header_bytes_ = body_bytes_ = written_ = 0;
  failure_ = ReadFailure::kNone;
  idle_deadline_ = ConnClock::now() + (first ? limits_.header_timeout : limits_.keep_alive_timeout);
  set_phase(Phase::kIdle);
}

void Connection::headers_complete() { set_phase(Phase::kBody); }

ConnClock::time_point Connection::read_deadline(ReadFailure* kind) const {
  switch (phase()) {
    case Phase::kIdle:
      *kind = ReadFailure::kIdleTimeout;
      return idle_deadline_;
    case Phase::kHeaders:
      if (header_deadline_ <= request_deadline_) {
        *kind = ReadFailure::kHeaderTimeout;
        return header_deadline_;
      }
      *kind = ReadFailure::kRequestTimeout;
      return request_deadline_;
    case Phase::kBody: break;
  }
  *kind = ReadFailure::kRequestTimeout;
  return request_deadline_;
}

// Refills the buffer: waits until data arrives or the phase's deadline passes.
ssize_t Connection::fill() {
  ReadFailure timeout_kind = ReadFailure::kNone;
  const ConnClock::time_point deadline = read_deadline(&timeout_kind);
  for (;;) {
    if (shut_down_.load()) {
      failure_ = ReadFailure::kShutDown;
      return -1;
    }
    const int wait_ms = ms_until(deadline);
    if (wait_ms <= 0) {
      failure_ = timeout_kind;
      return -1;
    }
    pollfd p{fd_, POLLIN, 0};
    const int rc = ::poll(&p, 1, wait_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) {
      failure_ = ReadFailure::kError;
      return -1;
    }
    if (rc == 0) continue;  // the loop re-checks the deadline
    const ssize_t n = ::recv(fd_, buf_.data(), buf_.size(), MSG_DONTWAIT);
    if (n > 0) {
      pos_ = 0;
      len_ = size_t(n);
      return n;
    }
    if (n == 0) {
      failure_ = shut_down_.load() ? ReadFailure::kShutDown : ReadFailure::kClosed;
      return 0;
    }
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    failure_ = shut_down_.load() ? ReadFailure::kShutDown : ReadFailure::kError;
    return -1;
  }
}

ssize_t Connection::read(char* ptr, size_t size) {
  if (size == 0) return 0;
  if (pos_ == len_) {
    const ssize_t n = fill();
    if (n <= 0) return n;
  }
  size_t n = std::min(size, len_ - pos_);
  // The first byte of a request starts its header and request deadlines.
  if (phase() == Phase::kIdle) {
    const auto now = ConnClock::now();
    header_deadline_ = now + limits_.header_timeout;
    request_deadline_ = now + limits_.request_timeout;
    set_phase(Phase::kHeaders);
  }
  size_t* used = phase() == Phase::kHeaders ? &header_bytes_ : &body_bytes_;
  const size_t cap = phase() == Phase::kHeaders ? limits_.max_header_bytes : limits_.max_body_wire_bytes;
  if (*used >= cap) {
    failure_ = phase() == Phase::kHeaders ? ReadFailure::kHeaderTooLarge : ReadFailure::kBodyTooLarge;
    return -1;
  }
  n = std::min(n, cap - *used);
  *used += n;
  std::memcpy(ptr, buf_.data() + pos_, n);
  pos_ += n;
  return ssize_t(n);
}

bool Connection::is_readable() const {
  if (pos_ < len_) return true;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

bool Connection::is_writable() const { return !peer_closed(); }

bool Connection::peer_closed() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

ssize_t Connection::write(const char* ptr, size_t size) {
  const auto deadline = ConnClock::now() + limits_.write_timeout;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::send(fd_, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {  // a slow reader: wait, bounded
      const int wait_ms = ms_until(deadline);
      if (wait_ms <= 0 || shut_down_.load()) return -1;
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, std::min(wait_ms, 1000)) < 0 && errno != EINTR) return -1;
      continue;
    }
    return -1;
  }
  written_ += size;
  return ssize_t(size);
}

void Connection::get_remote_ip_and_port(std::string& ip, int& port) const { address_of(fd_, true, ip, port); }
void Connection::get_local_ip_and_port(std::string& ip, int& port) const { address_of(fd_, false, ip, port); }

void Connection::shutdown_now() {
  shut_down_.store(true);
  ::shutdown(fd_, SHUT_RDWR);
}

void Connection::close_gracefully() {
  if (closed_fd_) return;
  ::shutdown(fd_, SHUT_WR);
  const auto deadline = ConnClock::now() + limits_.linger_time;
  size_t drained = 0;
  char sink[16384];
  while (drained < limits_.linger_bytes && !shut_down_.load()) {
    const int wait_ms = ms_until(deadline);
    if (wait_ms <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    const int rc = ::poll(&p, 1, wait_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) break;
    const ssize_t n = ::recv(fd_, sink, sizeof(sink), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    drained += size_t(n);
  }
  ::close(fd_);
  closed_fd_ = true;
}

// --- ConnectionRegistry ---

bool ConnectionRegistry::admit(Connection* c) {
  std::lock_guard<std::mutex> lk(mu_);
  if (draining_) {
    refused_total_++;
    return false;
  }
  if (conns_.size() - shut_.size() >= size_t(max_)) {
    Connection* victim = nullptr;
    for (Connection* o : conns_) {
      if (o->was_shut_down() || o->phase() == Connection::Phase::kBody) continue;
      if (!victim || o->phase_since_ns() < victim->phase_since_ns()) victim = o;
    }
    if (!victim) {
      refused_total_++;
      return false;
    }
    victim->shutdown_now();  // its thread removes it; its fd stays open until then
    shut_.push_back(victim);
    evicted_total_++;
  }
  conns_.push_back(c);
  return true;
}

void ConnectionRegistry::remove(Connection* c) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = std::find(conns_.begin(), conns_.end(), c);
  if (it == conns_.end()) return;
  conns_.erase(it);
  if (auto s = std::find(shut_.begin(), shut_.end(), c); s != shut_.end()) shut_.erase(s);
}

void ConnectionRegistry::shutdown_connections(bool all) {
  std::lock_guard<std::mutex> lk(mu_);
  draining_ = true;
  for (Connection* o : conns_)
    if (!o->was_shut_down() && (all || o->phase() != Connection::Phase::kBody)) {
      o->shutdown_now();
      shut_.push_back(o);
    }
}

int ConnectionRegistry::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return int(conns_.size() - shut_.size());
}

}  // namespace nanovllm::server
