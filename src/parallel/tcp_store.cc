#include "parallel/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/check.h"

namespace nanovllm {

namespace {

using Clock = std::chrono::steady_clock;

// Resolves host (name or numeric, IPv4) to a sockaddr_in.
sockaddr_in resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  NV_CHECK(rc == 0 && res, "cannot resolve rendezvous host '", host, "': ", gai_strerror(rc));
  sockaddr_in sa = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  freeaddrinfo(res);
  sa.sin_port = htons(uint16_t(port));
  return sa;
}

bool send_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}

bool recv_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = ::recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}

bool recv_blob(int fd, std::string* s) {
  uint32_t n = 0;
  if (!recv_all(fd, &n, 4) || n > (64u << 20)) return false;
  s->resize(n);
  return n == 0 || recv_all(fd, s->data(), n);
}

}  // namespace

std::pair<std::string, int> parse_host_port(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  NV_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < addr.size(),
           "rendezvous address '", addr, "' must be HOST:PORT (e.g. 127.0.0.1:29500)");
  const std::string host = addr.substr(0, colon), port_s = addr.substr(colon + 1);
  size_t used = 0;
  int port = -1;
  try {
    port = std::stoi(port_s, &used);
  } catch (...) {
    used = 0;
  }
  NV_CHECK(used == port_s.size() && port >= 0 && port <= 65535, "rendezvous address '", addr,
           "': port must be an integer in [0, 65535]");
  return {host, port};
}

TcpStoreServer::TcpStoreServer(const std::string& host, int port) {
  sockaddr_in sa = resolve(host, port);
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  NV_CHECK(listen_fd_ >= 0, "rendezvous store: socket(): ", std::strerror(errno));
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(listen_fd_, 128) != 0) {
    const int e = errno;
    ::close(listen_fd_);
    NV_THROW("rendezvous store cannot listen on ", host, ":", port, ": ", std::strerror(e));
  }
  socklen_t len = sizeof sa;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.sin_port);
  NV_CHECK(::pipe2(wake_fd_, O_CLOEXEC) == 0, "rendezvous store: pipe(): ", std::strerror(errno));
  thread_ = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  if (thread_.joinable()) {
    char c = 0;
    (void)!::write(wake_fd_[1], &c, 1);
    thread_.join();
  }
  for (int fd : {listen_fd_, wake_fd_[0], wake_fd_[1]})
    if (fd >= 0) ::close(fd);
}

void TcpStoreServer::serve() {
  // Requests are tiny and answered at once, so each accepted connection is served to completion
  // (one request, one reply) before the next poll: a client that stalls mid-request is dropped
  // by its receive timeout.
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    if (!(p[0].revents & POLLIN)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char op = 0;
    std::string key, val;
    if (recv_all(fd, &op, 1) && recv_blob(fd, &key)) {
      if (op == 'S' && recv_blob(fd, &val)) {
        data_[key] = std::vector<char>(val.begin(), val.end());
        const char ok = 1;
        send_all(fd, &ok, 1);
      } else if (op == 'G' || op == 'C') {
        auto it = data_.find(key);
        const char found = it != data_.end();
        send_all(fd, &found, 1);
        if (found && op == 'G') {
          const uint32_t n = uint32_t(it->second.size());
          if (send_all(fd, &n, 4) && n) send_all(fd, it->second.data(), n);
        }
      }
    }
    ::close(fd);
  }
}

TcpStore::TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout,
                   std::function<void()> abort_check)
    : host_(host), port_(port), timeout_(timeout), abort_check_(std::move(abort_check)) {
  // One probe connection: proves the server is up (retrying until the timeout) and tells which
  // local interface reaches it.
  const sockaddr_in sa = resolve(host_, port_);
  const auto deadline = Clock::now() + timeout_;
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    NV_CHECK(fd >= 0, "rendezvous store: socket(): ", std::strerror(errno));
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0) {
      sockaddr_in local{};
      socklen_t len = sizeof local;
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
      char buf[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf);
      local_ip_ = buf;
      ::close(fd);
      return;
    }
    const int e = errno;
    ::close(fd);
    if (abort_check_) abort_check_();
    NV_CHECK(Clock::now() < deadline, "cannot reach the rendezvous store at ", host_, ":", port_,
             " within ", timeout_.count() / 1000.0, " s: ", std::strerror(e),
             " (is rank 0 running with the same --dist-init-addr?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<char> TcpStore::request(char op, const std::string& key, const std::vector<char>* val,
                                    bool* found) {
  const sockaddr_in sa = resolve(host_, port_);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  NV_CHECK(fd >= 0, "rendezvous store: socket(): ", std::strerror(errno));
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0;
  const uint32_t klen = uint32_t(key.size());
  ok = ok && send_all(fd, &op, 1) && send_all(fd, &klen, 4) && send_all(fd, key.data(), klen);
  if (ok && val) {
    const uint32_t vlen = uint32_t(val->size());
    ok = send_all(fd, &vlen, 4) && (vlen == 0 || send_all(fd, val->data(), vlen));
  }
  char status = 0;
  ok = ok && recv_all(fd, &status, 1);
  std::string out;
  if (ok && op == 'G' && status) ok = recv_blob(fd, &out);
  const int e = errno;
  ::close(fd);
  NV_CHECK(ok, "rendezvous store at ", host_, ":", port_, " failed during '", key,
           "': ", std::strerror(e), " (did rank 0 exit?)");
  if (found) *found = status != 0;
  return std::vector<char>(out.begin(), out.end());
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  request('S', key, &data, nullptr);
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key}, timeout_);
  bool found = false;
  std::vector<char> v = request('G', key, nullptr, &found);
  NV_CHECK(found, "rendezvous store: key '", key, "' vanished");
  return v;
}

void TcpStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const auto deadline = Clock::now() + std::min(timeout, timeout_);
  for (const auto& key : keys) {
    for (;;) {
      bool found = false;
      request('C', key, nullptr, &found);
      if (found) break;
      if (abort_check_) abort_check_();
      NV_CHECK(Clock::now() < deadline, "rendezvous timed out after ",
               std::min(timeout, timeout_).count() / 1000.0, " s waiting for '", key,
               "' (a rank did not join: check --tensor-parallel-size and that every rank was "
               "started with the same --dist-init-addr)");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace nanovllm
