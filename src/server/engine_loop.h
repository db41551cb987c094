// The bridge between HTTP handler threads and the (not thread-safe) engine. One engine thread
// owns the LLM: it takes submissions from a mutex-protected queue, renders/tokenizes prompts,
// adds them to the running batch at the next step (continuous batching across HTTP requests),
// steps the engine while there is work, and routes stream deltas to per-request Channels.
// When idle it sleeps on a condition variable.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "nanovllm/llm.h"
#include "server/api_error.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace nanovllm::server {

using Clock = std::chrono::steady_clock;

// One request's output: the engine thread pushes, the handler thread pops.
class Channel {
 public:
  struct Batch {
    std::vector<StreamDelta> deltas;
    std::optional<ApiError> error;  // the request never reached the engine
    bool done = false;              // no more deltas will come
  };
  // Waits up to `timeout` for news; returns what is queued (possibly nothing).
  Batch wait(std::chrono::milliseconds timeout);
  bool done() const;

  // Engine thread.
  void push(StreamDelta d);
  void fail(ApiError e);

 private:
  friend class EngineLoop;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamDelta> q_;
  std::optional<ApiError> error_;
  bool done_ = false;

  // Engine-thread-only state.
  GenerationRequest req_;
  Clock::time_point arrival_, last_token_;
  uint64_t request_id_ = 0;
  bool in_engine_ = false;
  bool got_first_ = false;
};

class EngineLoop {
 public:
  // `max_waiting` > 0 bounds queued + engine-waiting requests (beyond it submit() throws 503).
  EngineLoop(LLM& llm, ServerMetrics& metrics, int max_waiting);
  ~EngineLoop();
  void start();
  // Aborts in-flight requests (their channels get a final "abort" delta), fails queued ones,
  // and joins the engine thread. Idempotent.
  void stop();

  // Handler threads. submit() throws ApiError 503 when the queue is full or stopping.
  std::shared_ptr<Channel> submit(GenerationRequest req, Clock::time_point arrival);
  void abort(const std::shared_ptr<Channel>& ch);  // e.g. the client went away
  EngineSnapshot snapshot() const;

 private:
  void run();
  void admit(const std::shared_ptr<Channel>& ch);
  void dispatch(std::vector<StreamDelta> deltas);
  void fail_all_live(const std::string& message);
  void publish();

  LLM& llm_;
  ServerMetrics& metrics_;
  const int max_waiting_;
  const int max_model_len_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Channel>> pending_;
  std::vector<std::shared_ptr<Channel>> aborts_;
  bool stopping_ = false;
  std::atomic<int> engine_waiting_{0};

  std::unordered_map<uint64_t, std::shared_ptr<Channel>> live_;  // engine thread only

  mutable std::mutex snap_mu_;
  EngineSnapshot snap_;
  std::thread thread_;
};

// Strips the "[error at file:line]" / "[check failed: ...]" suffix of nanovllm::Error messages.
std::string client_message(const std::string& what);

}  // namespace nanovllm::server
