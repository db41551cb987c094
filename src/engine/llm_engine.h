// LLMEngine: the orchestrator behind nanovllm::LLM. Owns the tokenizer, the model runner, the
// scheduler and every live Request (request.h); turns prompts into requests and drives the step
// loop: schedule -> prepare -> forward -> sample -> postprocess (check_stop: StopChecker) ->
// events to each request's sink (request_output.h: OutputSink). Text and stop strings are the
// completions' OutputStreams (output_stream.h), the statistics a StatsRecorder (stats_recorder.h).
// Not thread-safe: one thread drives it (the server wraps it in an engine thread).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_tracer.h"
#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/stop_checker.h"
#include "models/pooling_config.h"
#include "engine/structured_decoding.h"
#include "engine/stats_recorder.h"
#include "nanovllm/config.h"
#include "nanovllm/prompt.h"
#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"
#include "nanovllm/stats.h"
#include "spec/spec_decoder.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm {

class LLMEngine {
 public:
  explicit LLMEngine(const Config& config);
  ~LLMEngine();

  // Enqueues a request; its events go to `sink` (null: step() returns its final outputs).
  // `origin`: what Config::trace_requests records besides the prompt and parameters.
  uint64_t add_request(const Prompt& prompt, const SamplingParams& params, std::shared_ptr<OutputSink> sink,
                       bool stream, const RequestOrigin* origin = nullptr);
  // One step; returns the final outputs of requests added without a sink that finished since
  // the last call.
  std::vector<RequestOutput> step();
  bool is_finished() const;
  // Ends every unfinished completion of the request (O(n) in its completions); unknown ids are
  // ignored.
  void abort(uint64_t request_id);
  void abort_all();
  // A named instant in the --trace file (no-op without one).
  void trace_marker(std::string_view name) {
    if (tracer_) tracer_->marker(name);
  }
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
  // n > 1: completions 1..n-1 share the prompt blocks completion 0's prefill just computed.
  void fork_completions(Request& r);
  // The one way a completion ends (check_stop's decision, abort, rejection): records `reason`
  // (once), frees its blocks if the scheduler still holds it, and sends its final event. The
  // request retires with its last completion.
  void finish(Completion& c, FinishReason reason);
  // Sends c's event to its request's sink (final: its last one).
  void emit(Completion& c, bool final);
  // Config::task "embed": the step's forward returns pooled rows instead of logits; a sequence
  // whose prompt is complete finishes with its embedding.
  void embed_step(const SchedulerOutput& so);
  void sample_step(const SchedulerOutput& so);
  void record_prompt_logprobs(const SchedulerOutput& so, const Tensor& hidden);

  Config config_;
  ModelConfig mc_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<StructuredDecoding> structured_;  // null without a tokenizer
  ThinkTokens think_tokens_;                        // the <think> / </think> ids (thinking_budget)
  std::optional<PoolingConfig> pooling_;            // set: an embedding engine (Config::task "embed")
  std::vector<int> eos_ids_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<StopChecker> stop_;
  std::unique_ptr<StatsRecorder> stats_;
  std::unordered_map<uint64_t, std::unique_ptr<Request>> requests_;  // live requests, by request id
  // Finished requests, destroyed at the end of the step (or the next step's start), so the
  // step's SchedulerOutput never points at a destroyed sequence.
  std::vector<std::unique_ptr<Request>> retired_;
  // The sink of requests added without one: step() returns (and empties) it.
  std::shared_ptr<EventQueue> step_outputs_;
  uint64_t next_id_ = 0;
  std::unique_ptr<EngineTracer> tracer_;  // null unless config.trace_path is set
  std::unique_ptr<SpecDecoder> spec_;     // null unless config.speculative is set
};

}  // namespace nanovllm
