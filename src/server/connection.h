// One client connection as cpp-httplib's Stream, owned by our connection loop
// (guarded_server.h) for all the requests it carries, with the limits httplib 0.11 lacks:
// - deadlines per request, not per recv(): the first byte of a request must come within the
//   keep-alive timeout (the header timeout on a new connection), the request line and headers
//   within the header timeout of that byte, and headers + body within the request timeout;
// - byte caps: headers at most max_header_bytes, body bytes on the wire at most
//   max_body_wire_bytes (chunk framing included; the decoded body has its own limit);
// - one read buffer for the connection's lifetime, so pipelined requests are not lost
//   (httplib makes a new SocketStream, and drops its buffer, for every request);
// - peer_closed(): whether the client went away, checked while a request waits for the engine;
// - a graceful close (FIN, then drain what the client still sends) so that an error response
//   is not destroyed by a TCP reset.
// Reads and writes happen on the connection's thread only; shutdown_now() and the phase
// getters may be called from other threads (ConnectionRegistry).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "server/httplib_include.h"

namespace nanovllm::server {

using ConnClock = std::chrono::steady_clock;

struct ConnLimits {
  size_t max_header_bytes = 64 << 10;      // request line + headers
  size_t max_body_wire_bytes = 24u << 20;  // body bytes read from the socket, framing included
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds request_timeout{60000};
  std::chrono::milliseconds keep_alive_timeout{5000};
  std::chrono::milliseconds write_timeout{30000};
  // Graceful close: what the client still sends after our last response is read and dropped,
  // up to this much, so that a client still sending a refused body gets to read the answer.
  size_t linger_bytes = 24u << 20;
  std::chrono::milliseconds linger_time{2000};
};

// Why the last read failed (kNone while reads succeed).
enum class ReadFailure : uint8_t {
  kNone,
  kIdleTimeout,     // no request started in time: closed silently
  kHeaderTimeout,   // 408
  kRequestTimeout,  // 408
  kHeaderTooLarge,  // 431
  kBodyTooLarge,    // 413
  kClosed,          // the client closed its side
  kShutDown,        // shut down by the server (eviction, drain)
  kError,
};

class Connection final : public httplib::Stream {
 public:
  enum class Phase : uint8_t { kIdle, kHeaders, kBody };

  Connection(int fd, const ConnLimits& limits);
  ~Connection() override;  // closes the socket if close_gracefully() was not called
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // httplib::Stream
  bool is_readable() const override;
  bool is_writable() const override;  // false once the client is gone (ends idle SSE streams)
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

  // The connection loop: before each request (first: a new connection), and once the request
  // line and headers are parsed (httplib's setup_request hook).
  void begin_request(bool first);
  void headers_complete();

  ReadFailure failure() const { return failure_; }
  // Bytes written since begin_request(): 0 means this request got no answer yet.
  size_t bytes_written() const { return written_; }
  // The client closed or reset the connection (pending pipelined data does not count).
  bool peer_closed() const;
  // Close after the current response (client asked, or the request was not read completely).
  void set_close() { close_ = true; }
  bool close_requested() const { return close_; }

  // Any thread: wakes a blocked read, which then fails with kShutDown.
  void shutdown_now();
  Phase phase() const { return phase_.load(std::memory_order_acquire); }
  // When the current phase began (steady clock, ns): the eviction order.
  int64_t phase_since_ns() const { return since_ns_.load(std::memory_order_acquire); }
  bool was_shut_down() const { return shut_down_.load(); }

  // FIN, then read and drop what the client still sends (up to linger_bytes / linger_time)
  // before close(), so unread input does not turn into a reset that destroys the response.
  void close_gracefully();

 private:
  ssize_t fill();
  ConnClock::time_point read_deadline(ReadFailure* kind) const;
  void set_phase(Phase p);

  int fd_;
  ConnLimits limits_;
  std::vector<char> buf_;
  size_t pos_ = 0, len_ = 0;
  size_t header_bytes_ = 0, body_bytes_ = 0, written_ = 0;
  ConnClock::time_point idle_deadline_, header_deadline_, request_deadline_;
  ReadFailure failure_ = ReadFailure::kNone;
  bool close_ = false;
  bool closed_fd_ = false;
  std::atomic<Phase> phase_{Phase::kIdle};
  std::atomic<int64_t> since_ns_{0};
  std::atomic<bool> shut_down_{false};
};

// The open connections, bounded. At the limit, a new connection makes room by shutting down
// the connection that has waited longest without a complete request (idle keep-alive, or still
// dribbling its headers: a slowloris client), so such clients cannot keep others out; only when
// every connection carries a request is the new one refused (503).
class ConnectionRegistry {
 public:
  explicit ConnectionRegistry(int max_connections) : max_(max_connections) {}
  bool admit(Connection* c);
  void remove(Connection* c);
  // Drain: shut down every connection that is between requests (all: every connection);
  // later admits fail.
  void shutdown_connections(bool all);
  int size() const;
  int64_t evicted() const { return evicted_total_.load(); }
  int64_t refused() const { return refused_total_.load(); }

 private:
  mutable std::mutex mu_;
  std::vector<Connection*> conns_;
  std::vector<Connection*> shut_;  // shut down here, not yet removed by their threads
  int max_;
  bool draining_ = false;
  std::atomic<int64_t> evicted_total_{0}, refused_total_{0};
};

}  // namespace nanovllm::server
