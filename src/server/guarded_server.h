// httplib::Server with our own connection loop. cpp-httplib 0.11 (Debian's compiled library,
// kept as is) runs each accepted socket through a private virtual process_and_close_socket();
// GuardedServer overrides it to serve the socket through a Connection (connection.h: request
// deadlines, byte caps, a persistent read buffer, graceful close), admitted by a bounded
// ConnectionRegistry, and calls httplib's protected process_request() once per request.
// Handlers reach the connection that carries their request through current_connection(): a
// connection is served start to end on one thread, and httplib's callbacks have no context
// argument for it.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "server/connection.h"
#include "server/httplib_include.h"

namespace nanovllm::server {

class GuardedServer : public httplib::Server {
 public:
  GuardedServer(const ConnLimits& limits, int max_connections);
  ~GuardedServer() override;

  // Serves one connected socket until it closes, then closes it (the accept loop calls this
  // on a worker thread; tests and the fuzzer call it on any connected socket).
  void serve_socket(int fd);

  // Graceful drain: keep-alive ends, connections between requests are closed, new ones refused.
  void drain();
  // End of the drain: shut down every connection still open (e.g. a client that stopped reading).
  void close_all() { registry_.shutdown_connections(true); }
  bool draining() const { return draining_.load(); }

  const ConnectionRegistry& registry() const { return registry_; }
  // The connection whose request the calling thread is handling (null outside a request).
  static Connection* current_connection();

  // An error response written directly (no httplib request to attach it to): 503 for a
  // connection the registry refused; 408 / 431 when the request line itself was too slow or
  // too long (httplib closes those without an answer).
  static void write_raw_error(Connection& c, int status, const char* reason, const std::string& message,
                              const char* code);

 private:
  bool process_and_close_socket(socket_t sock) override;


  ConnLimits limits_;
  ConnectionRegistry registry_;
  std::atomic<bool> draining_{false};
};

// httplib's task queue for accepted sockets: one thread per connection, started on demand
// (idle ones reused) up to `max_threads`; beyond that, sockets wait in FIFO order.
class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads) : max_threads_(max_threads) {}
  ~ConnectionThreads() override { shutdown(); }
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;  // runs what is queued, then joins every thread

 private:
  void worker();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t max_threads_;
  size_t idle_ = 0;
  bool stop_ = false;
};

}  // namespace nanovllm::server
