// LLMEngine: the orchestrator behind nanovllm::LLM. Owns the tokenizer, scheduler and model
// runner; turns prompts into Sequences, drives schedule -> forward -> sample -> postprocess,
// detokenizes incrementally, applies stop strings, and produces outputs, stream deltas and stats.
// Not thread-safe: one thread drives it (the server wraps it in an engine thread).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_tracer.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "engine/structured_decoding.h"
#include "nanovllm/llm.h"
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

  const EngineStats& stats() const { return stats_; }
  const StepStats& last_step_stats() const { return last_step_; }
  const Config& config() const { return config_; }
  const ModelConfig& model_config() const { return mc_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const std::vector<int>& eos_token_ids() const { return eos_ids_; }
  std::string apply_chat_template(const std::string& messages_json, bool add_generation_prompt,
                                  const std::string& extra_kwargs_json) const;
  size_t weight_bytes() const;

 private:
  struct Request;
  void fork_completions(Request& parent, const Sequence& parent_seq);
  void on_token(Request& r, Sequence& seq, int token, const TokenLogprobs* lp);
  RequestOutput make_output(Request& r, const Sequence* seq);
  void push_delta(Request& r, bool final_delta);
  void finish_request(uint64_t id, const std::string& reason, std::vector<RequestOutput>& out);
  void refresh_stats();

  Config config_;
  ModelConfig mc_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<StructuredDecoding> structured_;  // null without a tokenizer
  std::vector<int> eos_ids_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  std::map<uint64_t, std::unique_ptr<Request>> requests_;
  std::vector<RequestOutput> pending_failed_;  // rejected at add_request, reported by step()
  std::vector<StreamDelta> deltas_;
  uint64_t next_id_ = 0;
  EngineStats stats_;
  StepStats last_step_;
  std::unique_ptr<EngineTracer> tracer_;  // null unless config.trace_path is set
};

}  // namespace nanovllm
