// What the engine returns per request: final outputs, incremental stream deltas, and the events
// that carry both to a request's sink.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace nanovllm {

struct TokenLogprob {
  int token_id = 0;
  float logprob = 0.f;
};

// Per generated token: the sampled token's logprob and the top-N alternatives.
struct TokenLogprobs {
  float logprob = 0.f;
  std::vector<TokenLogprob> top;
  int rank = 0;  // prompt_logprobs: 1 + the tokens more likely than this one (0: not computed)
};

// One completion of a request (a request with SamplingParams::n > 1 has n of them, each with its
// own output, delta stream and finish, told apart by `index`).
struct RequestOutput {
  uint64_t request_id = 0;
  int index = 0;                       // which of the request's n completions
  std::vector<int> prompt_token_ids;
  std::vector<int> token_ids;          // generated tokens (stop token included, stop string not)
  std::string text;                    // decoded generated text (stop string cut off)
  bool finished = false;
  std::string finish_reason;           // "stop" | "length" | "abort" | "error"
  std::string error;                   // set when finish_reason == "error"
  std::string stop_reason;             // the stop string that ended it ("" otherwise), vLLM's field
  int num_cached_tokens = 0;           // prompt tokens served from the prefix cache
  std::vector<TokenLogprobs> logprobs; // when SamplingParams::logprobs >= 0
  std::vector<float> embedding;        // Config::task "embed": the pooled (normalized) vector
  // SamplingParams::prompt_logprobs >= 0: entry i scores prompt token i + 1 given the tokens
  // before it (the first prompt token has none), with its rank and the top-N alternatives.
  std::vector<TokenLogprobs> prompt_logprobs;
};

// An incremental piece of a request's output (for streaming).
struct StreamDelta {
  uint64_t request_id = 0;
  int index = 0;                       // which of the request's n completions
  std::vector<int> token_ids;          // tokens new since the last delta
  std::string text;                    // text new since the last delta (complete UTF-8 only)
  std::vector<TokenLogprobs> logprobs;
  bool finished = false;               // this completion is done (the request: when all n are)
  std::string finish_reason;
  std::string error;
  std::string stop_reason;             // final delta: the stop string that matched ("" otherwise)
  int num_prompt_tokens = 0;
  int num_generated_tokens = 0;        // total so far
  int num_cached_tokens = 0;           // prompt tokens served from the prefix cache
  std::vector<float> embedding;        // final delta of an embedding request (Config::task "embed")
  std::vector<TokenLogprobs> prompt_logprobs;  // final delta: RequestOutput::prompt_logprobs
};

// One output event of one completion. Events of a completion arrive in order; its last one has
// `output` set (the completion finished). A request's last event has `request_finished` set:
// nothing more comes for it. Requests added with stream = true get an event whenever a step
// produces something new; the others get only the final event of each completion.
struct CompletionEvent {
  StreamDelta delta;                    // what is new (final: the rest, and the finish reason)
  std::optional<RequestOutput> output;  // the completion's whole output, once it finished
  bool request_finished = false;        // every completion of the request has finished
};

// Where a request's events go (LLM::add_request). Called on the thread that drives the engine,
// inside add_request (a request rejected at once), step() and abort(); it must not call back
// into the engine. The engine keeps the sink alive until the request's last event.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void on_event(CompletionEvent&& event) = 0;
};

// A sink that queues events until they are taken (thread-safe: the engine thread pushes, any
// thread takes). The server's and the Python binding's per-request queues are these.
class EventQueue : public OutputSink {
 public:
  void on_event(CompletionEvent&& event) override;
  std::vector<CompletionEvent> take();
  bool empty() const;

 private:
  mutable std::mutex mu_;
  std::vector<CompletionEvent> events_;
};

}  // namespace nanovllm
