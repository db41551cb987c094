// LLMEngine: the orchestrator behind nanovllm::LLM. Owns the tokenizer, the model runner, the
// scheduler and every live Request (request.h); turns prompts into requests and drives the step
// loop: schedule -> prepare -> forward -> sample -> postprocess -> outputs and stream deltas.
// Text and stop strings are the requests' OutputStreams (output_stream.h), the statistics a
// StatsRecorder (stats_recorder.h).
// Not thread-safe: one thread drives it (the server wraps it in an engine thread).
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_tracer.h"
#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/structured_decoding.h"
#include "engine/stats_recorder.h"
#include "nanovllm/config.h"
#include "nanovllm/prompt.h"
#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"
#include "nanovllm/stats.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm {

class LLMEngine {
 public:
  explicit LLMEngine(const Config& config);
  ~LLMEngine();

  uint64_t add_request(const Prompt& prompt, const SamplingParams& params, bool stream);
  std::vector<RequestOutput> step();
  bool is_finished() const;
  void abort(uint64_t request_id);
  std::vector<StreamDelta> take_stream_deltas();
  // Compiles (and caches) an output constraint; throws Error naming what is unsupported.
  // Thread-safe (the server calls it on handler threads).
  void prepare_constraint(const StructuredOutputsParams& so) const;
  std::vector<RequestOutput> generate(const std::vector<Prompt>& prompts,
                                      const std::vector<SamplingParams>& params, bool progress);

  const EngineStats& stats() const { return stats_->stats(); }
  const StepStats& last_step_stats() const { return stats_->last_step(); }
  const Config& config() const { return config_; }
  const ModelConfig& model_config() const { return mc_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const std::vector<int>& eos_token_ids() const { return eos_ids_; }
  std::string apply_chat_template(const std::string& messages_json, bool add_generation_prompt,
                                  const std::string& extra_kwargs_json) const;
  size_t weight_bytes() const;

 private:
  std::vector<int> prompt_token_ids(const Prompt& prompt) const;
  Request& request_of(const Sequence& seq);
  // n > 1: completions 1..n-1 share the prompt blocks `parent`'s prefill just computed.
  void fork_completions(Request& parent);
  // A request that finished (seq.finish_reason set, no longer in the scheduler): its output
  // goes to `out`, its final delta to the stream; then it moves to retired_.
  void finish_request(Request& r, std::vector<RequestOutput>& out);
  void push_delta(Request& r, bool final);

  Config config_;
  ModelConfig mc_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<StructuredDecoding> structured_;  // null without a tokenizer
  std::vector<int> eos_ids_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<StatsRecorder> stats_;
  std::unordered_map<uint64_t, std::unique_ptr<Request>> requests_;  // live requests
  // Finished requests, destroyed at the end of the step (or the next step's start), so the
  // step's SchedulerOutput never points at a destroyed sequence.
  std::vector<std::unique_ptr<Request>> retired_;
  // Outputs of requests finished outside step() (rejected at add_request, aborted): returned
  // by the next step().
  std::vector<RequestOutput> pending_outputs_;
  std::vector<StreamDelta> deltas_;
  uint64_t next_id_ = 0;
  std::unique_ptr<EngineTracer> tracer_;  // null unless config.trace_path is set
};

}  // namespace nanovllm
