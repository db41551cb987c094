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
#include "nanovllm/request_origin.h"
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

  // Enqueues a request; returns its id. Its events (CompletionEvent: each completion's deltas and
  // final output) go to `sink`; with stream = false only final events are sent. Without a sink
  // step() returns the request's final outputs. Invalid sampling params throw nanovllm::Error.
  // A prompt that can never run (too long, empty, larger than the KV cache) is accepted and
  // ends at once with finish_reason "error" and a clear message (its final events are sent
  // before add_request returns). `origin` (the HTTP route and body) is what --trace-requests
  // records besides the prompt ids and parameters; null: the in-process API.
  uint64_t add_request(const Prompt& prompt, const SamplingParams& params,
                       std::shared_ptr<OutputSink> sink = nullptr, bool stream = false,
                       const RequestOrigin* origin = nullptr);
  // One scheduling + forward + sampling step. Returns the final outputs (one per completion) of
  // the requests added without a sink that finished since the last call.
  std::vector<RequestOutput> step();
  bool is_finished() const;
  // Aborts a request (waiting or running): every unfinished completion ends with "abort", its
  // blocks freed at once. Unknown or finished ids are ignored.
  void abort(uint64_t request_id);
  // Aborts every live request (e.g. at shutdown).
  void abort_all();
  // Writes a named instant into the --trace file (no-op without one): `bench` marks
  // "warmup_end", before which `trace-view` leaves steps and requests out of its summary.
  void trace_marker(const std::string& name);
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
  // Bytes of the model's weights as loaded (quantized layouts, the embedding table, one copy of
  // a tensor-parallel rank's shard).
  size_t weight_bytes() const;
  const Tokenizer* tokenizer() const;  // null when the model dir has no tokenizer.json
  std::vector<int> eos_token_ids() const;
  // Renders the tokenizer's chat template (messages as JSON text).
  std::string apply_chat_template(const std::string& messages_json, bool add_generation_prompt,
                                  const std::string& extra_kwargs_json = "{}") const;

 private:
  std::unique_ptr<LLMEngine> engine_;
};

}  // namespace nanovllm
