// The bridge between HTTP handler threads and the (not thread-safe) engine. One engine thread
// owns the LLM: it takes submissions (token ids: prompts are rendered and tokenized on the
// handler threads, prompt_prep.h, never here) from a mutex-protected queue, adds them to the
// running batch at the next step (continuous batching across HTTP requests) with the request's
// Channel as its OutputSink (the engine hands each event to it: no routing by id), and steps the
// engine while there is work. When idle it sleeps on a condition variable. An exception from step() leaves the batch state unknown: the loop
// ends every live request with an error and is dead from then on (submissions get 503,
// /health answers 503), as vLLM does when its engine core dies.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "nanovllm/llm.h"
#include "nanovllm/request_origin.h"
#include "nanovllm/sampling_params.h"
#include "server/api_error.h"
#include "server/metrics.h"

namespace nanovllm::server {

using Clock = std::chrono::steady_clock;

// What the engine thread needs of a request: prepared token ids and final sampling parameters.
struct EngineRequest {
  std::vector<int> prompt_ids;
  SamplingParams params;
  RequestOrigin origin;  // route + body, kept only when the engine records requests (--trace-requests)
};

// One request's output: the engine thread pushes (it is the request's OutputSink), the handler
// thread pops.
class Channel : public OutputSink {
 public:
  struct Batch {
    std::vector<StreamDelta> deltas;
    std::optional<ApiError> error;  // the request never reached the engine
    bool done = false;              // no more deltas will come
  };
  // Waits up to `timeout` for news; returns what is queued (possibly nothing).
  Batch wait(std::chrono::milliseconds timeout);
  bool done() const;

  // Engine thread (called by the engine inside add_request / step / abort): metrics, then queued.
  void on_event(CompletionEvent&& e) override;
  void push(StreamDelta d);
  void fail(ApiError e);
  // Engine thread: a final delta (reason, error) for every completion not yet finished.
  void end_remaining(const std::string& reason, const std::string& error);

 private:
  friend class EngineLoop;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamDelta> q_;
  std::optional<ApiError> error_;
  bool done_ = false;

  // Engine-thread-only state.
  EngineRequest req_;
  ServerMetrics* metrics_ = nullptr;
  int n_ = 1;                     // completions (SamplingParams::n): done after n final deltas
  int finished_ = 0;              // final deltas pushed (under mu_)
  std::vector<char> engine_done_;  // engine thread: index -> its final event came
  std::vector<int> seen_generated_;  // engine thread: index -> tokens generated so far
  int seen_prompt_ = 0;
  Clock::time_point arrival_, last_token_;
  uint64_t request_id_ = 0;
  bool in_engine_ = false;
  bool engine_finished_ = false;  // the request's last event came: the engine holds it no more
  bool detached_ = false;         // events are ignored (the loop already ended this request)
  bool got_first_ = false;
  bool delivered_ = false;  // a delta was pushed (so a failure must arrive as a final delta)
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

  // Handler threads. submit() throws ApiError 503 when the queue is full, stopping or dead.
  std::shared_ptr<Channel> submit(EngineRequest req, Clock::time_point arrival);
  void abort(const std::shared_ptr<Channel>& ch);  // e.g. the client went away
  EngineSnapshot snapshot() const;
  // True after an engine failure: nothing more is served (/health answers 503).
  bool dead() const { return dead_.load(); }

  // Tests (call before start()): step() throws after this many successful steps; each step
  // takes at least `delay` (so that a client can leave while its request is still generating).
  void inject_fault_after_steps(int64_t steps) { fault_after_steps_ = steps; }
  void inject_step_delay(std::chrono::milliseconds delay) { step_delay_ = delay; }

 private:
  void run();
  void admit(const std::shared_ptr<Channel>& ch);
  void prune_live();
  void fail_all_live(const std::string& message);
  void fail_queued(const ApiError& e);
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
  std::atomic<bool> dead_{false};
  std::atomic<int> engine_waiting_{0};
  int64_t fault_after_steps_ = -1;
  std::chrono::milliseconds step_delay_{0};
  int64_t steps_ = 0;

  // Requests in the engine (engine thread only; finished ones pruned after each step): what an
  // engine failure or shutdown must still end. Not a routing table: events reach each channel
  // as its request's sink.
  std::vector<std::shared_ptr<Channel>> live_;

  mutable std::mutex snap_mu_;
  EngineSnapshot snap_;
  std::thread thread_;
};

}  // namespace nanovllm::server
