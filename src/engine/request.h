// One request and its completions, owned by the engine (LLMEngine keeps a Request from
// add_request until its last completion finished). The Request holds the request's only
// SamplingParams and the sink its events go to; each Completion (n of them, SamplingParams::n)
// holds a Sequence (the scheduler's view: the scheduler points at it while it is waiting or
// running) and the per-completion state that views the params: sampling inputs, the output
// stream, the grammar. A Sequence's `owner` points back at its Completion, so the engine finds
// a scheduled sequence's completion without a lookup. The finish reason lives in the Sequence.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/output_stream.h"
#include "engine/request_sampling.h"
#include "engine/sequence.h"
#include "engine/structured_decoding.h"
#include "engine/thinking_budget.h"
#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm {

struct Request;

struct Completion {
  Completion(Request& request, int index, uint64_t seq_id, std::vector<int> prompt_ids, uint64_t seed,
             int block_size, std::span<const int> eos_ids, const Tokenizer* tokenizer);
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  Request& request;
  const int index;                           // which of the request's n completions
  bool held = false;                         // index > 0, not yet forked into the scheduler
  bool ended = false;                        // finished and its final event sent (LLMEngine::finish)
  std::unique_ptr<SequenceGrammar> grammar;  // null without structured_outputs
  std::unique_ptr<ThinkingBudget> thinking;  // null without thinking_budget (or with a grammar)
  Sequence seq;                              // prompt + generated ids, blocks, status, finish reason
  RequestSampling sampling;                  // the sampling op's row inputs
  OutputStream output;                       // text, stop strings, logprobs, streamed offsets
  int num_cached_tokens = 0;                 // prompt tokens served from the prefix cache (first admission)
  std::string error;                         // why, when seq.finish_reason == kError
  // Embedding engines: the pooled rows so far (sum over chunks) and the final vector. An
  // embedding completion's output is the vector alone (no tokens, no text).
  std::vector<double> pool_sum;
  int pool_rows = 0;
  std::vector<float> embedding;
  bool embed = false;

  bool finished() const { return seq.is_finished(); }
  // The whole output (after the completion finished).
  RequestOutput final_output() const;
  // What is new since the last delta (final: all that is left, with the finish reason).
  // Returns false when nothing is new and it is not final.
  bool next_delta(bool final, StreamDelta& d);
};

struct Request {
  Request(uint64_t id, const SamplingParams& params, bool stream, std::shared_ptr<OutputSink> sink)
      : id(id), params(params), stream(stream), sink(std::move(sink)) {}
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  const uint64_t id;                  // = completion 0's sequence id (completions: id .. id + n - 1)
  const SamplingParams params;
  const bool stream;                  // an event per step, not only final ones
  const std::shared_ptr<OutputSink> sink;
  std::vector<std::unique_ptr<Completion>> completions;  // index order
  int num_unfinished = 0;
  // params.prompt_logprobs >= 0: entry i scores prompt token i + 1 (filled as the prompt's
  // chunks are computed; shared by the n completions, which share the prompt).
  std::vector<TokenLogprobs> prompt_logprobs;

  bool finished() const { return num_unfinished == 0; }
};

}  // namespace nanovllm
