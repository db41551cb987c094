// nanovllm::LLM: the public facade over LLMEngine.
#include "nanovllm/llm.h"

#include "engine/llm_engine.h"

namespace nanovllm {

LLM::LLM(const Config& config) : engine_(std::make_unique<LLMEngine>(config)) {}
LLM::~LLM() = default;
uint64_t LLM::add_request(const Prompt& p, const SamplingParams& sp, std::shared_ptr<OutputSink> sink,
                          bool stream, const RequestOrigin* origin) {
  return engine_->add_request(p, sp, std::move(sink), stream, origin);
}
void LLM::prepare_constraint(const StructuredOutputsParams& so) const { engine_->prepare_constraint(so); }
std::vector<RequestOutput> LLM::step() { return engine_->step(); }
bool LLM::is_finished() const { return engine_->is_finished(); }
void LLM::abort(uint64_t id) { engine_->abort(id); }
void LLM::abort_all() { engine_->abort_all(); }
void LLM::trace_marker(const std::string& name) { engine_->trace_marker(name); }
std::vector<RequestOutput> LLM::generate(const std::vector<Prompt>& prompts,
                                         const std::vector<SamplingParams>& params, bool progress) {
  return engine_->generate(prompts, params, progress);
}
const EngineStats& LLM::stats() const { return engine_->stats(); }
const StepStats& LLM::last_step_stats() const { return engine_->last_step_stats(); }
const Config& LLM::config() const { return engine_->config(); }
size_t LLM::weight_bytes() const { return engine_->weight_bytes(); }
const Tokenizer* LLM::tokenizer() const { return engine_->tokenizer(); }
std::vector<int> LLM::eos_token_ids() const { return engine_->eos_token_ids(); }
std::string LLM::apply_chat_template(const std::string& messages_json, bool add_generation_prompt,
                                     const std::string& extra_kwargs_json) const {
  return engine_->apply_chat_template(messages_json, add_generation_prompt, extra_kwargs_json);
}

void EventQueue::on_event(CompletionEvent&& event) {
  std::lock_guard<std::mutex> g(mu_);
  events_.push_back(std::move(event));
}

std::vector<CompletionEvent> EventQueue::take() {
  std::vector<CompletionEvent> out;
  std::lock_guard<std::mutex> g(mu_);
  out.swap(events_);
  return out;
}

bool EventQueue::empty() const {
  std::lock_guard<std::mutex> g(mu_);
  return events_.empty();
}

}  // namespace nanovllm
