#include "server/guarded_server.h"

#include "server/api_error.h"
#include "server/http_framing.h"

namespace nanovllm::server {
namespace {

// httplib's handlers and hooks carry no connection argument; each connection is served start
// to end on one thread, so this thread's current connection is that context.
thread_local Connection* t_current = nullptr;

struct CurrentScope {
  explicit CurrentScope(Connection* c) { t_current = c; }
  ~CurrentScope() { t_current = nullptr; }
};

constexpr size_t kMaxRequestsPerConnection = 100000;  // advertised as Keep-Alive max

}  // namespace

GuardedServer::GuardedServer(const ConnLimits& limits, int max_connections)
    : limits_(limits), registry_(max_connections) {
  set_keep_alive_max_count(kMaxRequestsPerConnection);
  set_keep_alive_timeout(std::max<time_t>(1, time_t(limits.keep_alive_timeout.count() / 1000)));
}

GuardedServer::~GuardedServer() = default;

Connection* GuardedServer::current_connection() { return t_current; }

bool GuardedServer::process_and_close_socket(socket_t sock) {
  serve_socket(sock);
  return true;
}

void GuardedServer::write_raw_error(Connection& c, int status, const char* reason, const std::string& message,
                                    const char* code) {
  const std::string body = dump_json(error_json(status, message, error_type_for_status(status), "", code));
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                     "\r\nContent-Type: application/json\r\nConnection: close\r\n";
  if (status == 503) head += "Retry-After: 1\r\n";
  head += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  (void)c.write(head.data(), head.size());
  (void)c.write(body.data(), body.size());
}

namespace {
// httplib answers nothing when the request line cannot be read; say why if we know.
void answer_unread_request_line(Connection& c) {
  if (c.bytes_written() > 0 || c.phase() != Connection::Phase::kHeaders) return;
  switch (c.failure()) {
    case ReadFailure::kHeaderTimeout:
    case ReadFailure::kRequestTimeout:
      GuardedServer::write_raw_error(c, 408, "Request Timeout", "request line not received in time (--header-timeout)",
                                     "request_timeout");
      break;
    case ReadFailure::kHeaderTooLarge:
      GuardedServer::write_raw_error(c, 431, "Request Header Fields Too Large",
                                     "request line and headers over the size limit", "headers_too_large");
      break;
    default: break;
  }
}
}  // namespace

void GuardedServer::serve_socket(int fd) {
  Connection conn(fd, limits_);
  if (!registry_.admit(&conn)) {
    write_raw_error(conn, 503, "Service Unavailable",
                    "too many open connections, all busy with requests; retry later (--max-connections)",
                    "too_many_connections");
    conn.close_gracefully();
    return;
  }
  {
    CurrentScope scope(&conn);
    for (size_t n = 0; n < kMaxRequestsPerConnection && !draining_.load(); ++n) {
      if (n > 0) conn.begin_request(false);
      bool closed = false;
      const bool ok = process_request(conn, /*close_connection=*/draining_.load(), closed,
                                      [&conn](httplib::Request& req) {
                                        conn.headers_complete();
                                        if (wants_connection_close(req.headers, req.version)) conn.set_close();
                                      });
      if (!ok) answer_unread_request_line(conn);
      // A request that was not read to its end leaves the stream unframed: never reuse it.
      if (!ok || closed || conn.close_requested() || conn.failure() != ReadFailure::kNone) break;
    }
  }
  registry_.remove(&conn);
  conn.close_gracefully();
}

void GuardedServer::drain() {
  draining_.store(true);
  registry_.shutdown_connections(false);
}

// --- ConnectionThreads ---

void ConnectionThreads::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lk(mu_);
  jobs_.push_back(std::move(fn));
  // Each idle thread takes one job; start another while jobs outnumber them (up to the cap).
  if (jobs_.size() > idle_ && threads_.size() < max_threads_) threads_.emplace_back([this] { worker(); });
  cv_.notify_one();
}

void ConnectionThreads::worker() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lk(mu_);
      ++idle_;
      cv_.wait(lk, [&] { return stop_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping and nothing left
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    fn();
  }
}

void ConnectionThreads::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads)
    if (t.joinable()) t.join();
}

}  // namespace nanovllm::server
