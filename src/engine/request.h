// One request, owned by the engine (LLMEngine keeps it from add_request until it finished). It
// holds the request's only SamplingParams and its Sequence; `seq`, `sampling` and `output` view
// `params`, and the scheduler points at `seq` while it is waiting or running. The finish reason
// lives in `seq` alone.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/output_stream.h"
#include "engine/request_sampling.h"
#include "engine/sequence.h"
#include "engine/structured_decoding.h"
#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm {

struct Request {
  // tokenizer may be null (no text, no stop strings).
  Request(uint64_t id, std::vector<int> prompt_ids, const SamplingParams& params, uint64_t seed,
          int block_size, std::span<const int> eos_ids, const Tokenizer* tokenizer, bool stream);
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  const uint64_t id;                // the sequence's id
  // n > 1: one Request per completion. The caller sees completion 0's id with an index.
  uint64_t output_id;               // = id of completion 0
  int index = 0;                    // which of the n completions
  std::vector<uint64_t> group;      // completion 0 of n > 1: every completion's id
  bool held = false;                // completion > 0, not yet forked into the scheduler
  std::unique_ptr<SequenceGrammar> grammar;  // null without structured_outputs
  const bool stream;               // produces StreamDeltas
  const SamplingParams params;
  Sequence seq;                    // prompt + generated ids, blocks, status, finish reason
  RequestSampling sampling;        // the sampling op's row inputs
  OutputStream output;             // text, stop strings, logprobs, streamed offsets
  int num_cached_tokens = 0;       // prompt tokens served from the prefix cache (first admission)
  std::string error;               // why, when seq.finish_reason == kError

  bool finished() const { return seq.is_finished(); }
  // The final output (after the request finished).
  RequestOutput final_output() const;
  // What is new since the last delta (final: all that is left, with the finish reason).
  // Returns false when nothing is new and it is not final.
  bool next_delta(bool final, StreamDelta& d);
};

}  // namespace nanovllm
