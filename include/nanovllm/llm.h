// The public engine API: offline batched generation and an incremental, thread-compatible
// request interface (one thread drives step(); the server wraps it with queues).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nanovllm/config.h"
#include "nanovllm/prompt.h"
#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"
#include "nanovllm/stats.h"

namespace nanovllm {

class Tokenizer;
class LLMEngine;

class LLM {
 public:
  explicit LLM(const Config& config);
  ~LLM();
  LLM(const LLM&) = delete;
  LLM& operator=(const LLM&) = delete;

  // Enqueues a request; returns its id. Invalid sampling params throw nanovllm::Error.
  // A prompt that can never run (too long, empty, larger than the KV cache) is accepted and
  // finishes on the next step() with finish_reason "error" and a clear message.
  uint64_t add_request(const Prompt& prompt, const SamplingParams& params);
  // One scheduling + forward + sampling step. Returns requests that finished in this step.
  std::vector<RequestOutput> step();
  bool is_finished() const;
  // Aborts a request (waiting or running); its blocks are freed at once. Unknown ids ignored.
  void abort(uint64_t request_id);
  // Stream deltas produced since the last call (only for requests added with stream = true).
  std::vector<StreamDelta> take_stream_deltas();
  uint64_t add_request_streaming(const Prompt& prompt, const SamplingParams& params);
  // Compiles (and caches) SamplingParams::structured_outputs so that add_request needs no
  // compilation; throws nanovllm::Error naming an unsupported schema feature or a malformed
  // constraint. Thread-safe, unlike the rest: the server calls it on its handler threads.
  void prepare_constraint(const StructuredOutputsParams& so) const;

  // Offline generation: outputs in input order. `params` has one entry (shared) or one per prompt.
  std::vector<RequestOutput> generate(const std::vector<Prompt>& prompts,
                                      const std::vector<SamplingParams>& params,
                                      bool progress = false);

  const EngineStats& stats() const;
  const StepStats& last_step_stats() const;
  const Config& config() const;        // after clipping and KV sizing
  const Tokenizer* tokenizer() const;  // null when the model dir has no tokenizer.json
  std::vector<int> eos_token_ids() const;
  // Renders the tokenizer's chat template (messages as JSON text).
  std::string apply_chat_template(const std::string& messages_json, bool add_generation_prompt,
                                  const std::string& extra_kwargs_json = "{}") const;

 private:
  std::unique_ptr<LLMEngine> engine_;
};

}  // namespace nanovllm
