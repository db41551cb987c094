#include "engine/llm_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "engine/request_sampling.h"
#include "engine/structured_decoding.h"
#include "tokenizer/chat_template.h"
#include "util/json_bounded.h"
#include "util/progress.h"

namespace nanovllm {

namespace fs = std::filesystem;

struct LLMEngine::Request {
  uint64_t id = 0;               // internal: = the sequence id
  uint64_t output_id = 0;        // the id the caller sees (shared by the n completions)
  int index = 0;                 // which of the n completions
  std::vector<uint64_t> group;   // index 0: every completion's id (n > 1)
  std::unique_ptr<Sequence> held_seq;  // index > 0: waits for the fork after index 0's prefill
  std::unique_ptr<SequenceGrammar> grammar;  // null without structured_outputs
  bool stopped_by_grammar = false;
  bool stream = false;
  SamplingParams params;
  std::vector<int> prompt_ids;
  std::unique_ptr<IncrementalDetokenizer> detok;
  std::string text;              // decoded generated text so far
  size_t streamed_text = 0;      // bytes of `text` already sent in deltas
  size_t streamed_tokens = 0;
  std::vector<int> out_tokens;   // generated token ids
  std::vector<TokenLogprobs> logprobs;
  size_t streamed_logprobs = 0;
  std::unique_ptr<RequestSampling> sampling;  // views `params`
  int num_cached_tokens = 0;
  bool stopped_by_string = false;
  bool finished = false;
  std::string finish_reason, error;
};

LLMEngine::LLMEngine(const Config& config) : config_(config) {
  config_.validate();
  NV_CHECK(fs::exists(fs::path(config_.model) / "config.json"), "model directory '", config_.model,
           "' has no config.json");
  mc_ = ModelConfig::from_dir(config_.model);
  config_.max_model_len = std::min(config_.max_model_len, mc_.max_position_embeddings);
  if (fs::exists(fs::path(config_.model) / "tokenizer.json"))
    tokenizer_ = Tokenizer::from_dir(config_.model);

  // EOS: generation_config.json / tokenizer_config.json (via the tokenizer), then config.json.
  if (tokenizer_) eos_ids_ = tokenizer_->eos_token_ids();
  for (int id : mc_.eos_token_ids)
    if (std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) eos_ids_.push_back(id);

  if (tokenizer_)
    structured_ = std::make_unique<StructuredDecoding>(
        *tokenizer_, eos_ids_, mc_.vocab_size,
        structured::tool_call_format_for_template(tokenizer_->chat_template()));

  runner_ = std::make_unique<ModelRunner>(config_, mc_);
  config_.num_kvcache_blocks = runner_->num_kvcache_blocks();
  config_.device = device_name(runner_->backend().device());
  // A sequence must always fit the cache alone, or it could be preempted forever.
  const int cache_tokens = config_.num_kvcache_blocks * config_.kvcache_block_size;
  if (config_.max_model_len > cache_tokens) {
    std::fprintf(stderr, "nanovllm: max_model_len lowered from %d to %d to fit the KV cache\n",
                 config_.max_model_len, cache_tokens);
    config_.max_model_len = cache_tokens;
  }
  NV_CHECK(config_.policy != "prefill-first" ||
               config_.max_num_batched_tokens >= config_.max_model_len,
           "max_num_batched_tokens (", config_.max_num_batched_tokens,
           ") must be >= max_model_len (", config_.max_model_len,
           ") with policy prefill-first; use --policy mixed for chunked prefill");

  SchedulerConfig sc;
  sc.max_num_seqs = config_.max_num_seqs;
  sc.max_num_batched_tokens = config_.max_num_batched_tokens;
  sc.num_kvcache_blocks = config_.num_kvcache_blocks;
  sc.block_size = config_.kvcache_block_size;
  sc.max_model_len = config_.max_model_len;
  sc.policy = config_.policy;
  sc.enable_prefix_caching = config_.enable_prefix_caching;
  sc.eos_token_ids = eos_ids_;
  scheduler_ = std::make_unique<Scheduler>(sc);
  stats_.num_blocks_total = config_.num_kvcache_blocks;
  stats_.executor = runner_->executor().name();
  stats_.graph_pool_bytes = runner_->executor().graph_pool_bytes();
  if (!config_.trace_path.empty()) tracer_ = std::make_unique<EngineTracer>(config_.trace_path, config_);
}

LLMEngine::~LLMEngine() {
  if (tracer_) tracer_->close(stats_);
}

size_t LLMEngine::weight_bytes() const { return runner_->model().weight_bytes(); }

// Completion i > 0 of a request samples from its own Philox stream: a seed derived from the
// request's seed (splitmix64 of seed + i), so a seeded request with n > 1 is reproducible.
static uint64_t completion_seed(uint64_t seed, int index) {
  if (index == 0) return seed;
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * uint64_t(index);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void LLMEngine::prepare_constraint(const StructuredOutputsParams& so) const {
  if (so.empty()) return;
  NV_CHECK(structured_ != nullptr, "structured outputs need a tokenizer (the model directory has no "
           "tokenizer.json)");
  (void)structured_->compile(so);
}

uint64_t LLMEngine::add_request(const Prompt& prompt, const SamplingParams& params, bool stream) {
  params.validate();
  uint64_t seed = 0;
  if (params.seed) {
    seed = *params.seed;
  } else {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    seed = rng();
  }
  std::vector<int> prompt_ids;
  if (auto* text = std::get_if<std::string>(&prompt.value)) {
    NV_CHECK(tokenizer_ != nullptr, "text prompt given but the model directory has no "
             "tokenizer.json; pass token ids");
    prompt_ids = tokenizer_->encode(*text, prompt.add_special_tokens);
  } else {
    prompt_ids = std::get<std::vector<int>>(prompt.value);
  }
  for (int id : prompt_ids)
    NV_CHECK(id >= 0 && id < mc_.vocab_size, "prompt token id ", id, " is outside the vocabulary [0, ",
             mc_.vocab_size, ")");
  for (const auto& [id, bias] : params.logit_bias)
    NV_CHECK(id < mc_.vocab_size, "logit_bias token id ", id, " is outside the vocabulary [0, ",
             mc_.vocab_size, ")");
  NV_CHECK(params.stop.empty() || tokenizer_, "stop strings need a tokenizer");
  prepare_constraint(params.structured_outputs);

  // One Request per completion; only index 0 is scheduled now, the others fork from it.
  const uint64_t output_id = next_id_;
  std::vector<Request*> group;
  for (int i = 0; i < params.n; ++i) {
    auto r = std::make_unique<Request>();
    r->id = next_id_++;
    r->output_id = output_id;
    r->index = i;
    r->stream = stream;
    r->params = params;
    r->prompt_ids = prompt_ids;
    r->sampling = std::make_unique<RequestSampling>(r->params, completion_seed(seed, i), r->prompt_ids, eos_ids_);
    if (tokenizer_)
      r->detok = std::make_unique<IncrementalDetokenizer>(*tokenizer_, params.skip_special_tokens);
    if (!params.structured_outputs.empty()) r->grammar = structured_->start(params.structured_outputs);
    auto seq = std::make_unique<Sequence>(r->id, r->prompt_ids, params, config_.kvcache_block_size);
    if (i > 0) r->held_seq = std::move(seq);
    group.push_back(r.get());
    requests_[r->id] = std::move(r);
    if (i == 0) {
      if (tracer_) tracer_->arrived(output_id, int(prompt_ids.size()));
      try {
        scheduler_->add(std::move(seq));
      } catch (const Error& e) {
        // The request can never run: report it as a finished error output on the next step().
        Request* rp = group[0];
        rp->finished = true;
        rp->finish_reason = "error";
        rp->error = e.what();
        stats_.failed_requests++;
        if (tracer_) tracer_->finished(output_id, "error");
        // Every completion ends with the error (its output and, streaming, its final delta).
        for (int k = 0; k < params.n; ++k) {
          rp->index = k;
          pending_failed_.push_back(make_output(*rp, nullptr));
          if (rp->stream) push_delta(*rp, true);
        }
        requests_.erase(output_id);
        return output_id;
      }
    }
  }
  if (params.n > 1)
    for (Request* r : group) group[0]->group.push_back(r->id);
  return output_id;
}

// n > 1: completions 1..n-1 share the prompt blocks that `parent`'s prefill just computed.
void LLMEngine::fork_completions(Request& parent, const Sequence& parent_seq) {
  for (uint64_t id : parent.group) {
    auto it = requests_.find(id);
    if (it == requests_.end() || !it->second->held_seq) continue;
    std::unique_ptr<Sequence> child = std::move(it->second->held_seq);
    scheduler_->block_manager().fork(parent_seq, *child);
    scheduler_->add(std::move(child));
  }
}

void LLMEngine::on_token(Request& r, Sequence& seq, int token, const TokenLogprobs* lp) {
  r.out_tokens.push_back(token);
  r.sampling->on_token(token);
  if (r.grammar) {
    // A token the grammar refuses would be a bug of the mask: end this request with an error
    // rather than the engine (and every other request) with an exception.
    if (!r.grammar->accept(token))
      r.error = "internal error: sampled token " + std::to_string(token) + " is outside the output constraint";
    r.stopped_by_grammar = !r.error.empty() || r.grammar->done();
  }
  if (lp) r.logprobs.push_back(*lp);
  if (!r.detok) return;
  const size_t before = r.text.size();
  r.text += r.detok->push(token);
  if (r.params.stop.empty()) return;
  size_t max_stop = 0;
  for (const auto& s : r.params.stop) max_stop = std::max(max_stop, s.size());
  const size_t from = before >= max_stop ? before - max_stop + 1 : 0;
  size_t best = std::string::npos;
  for (const auto& s : r.params.stop) {
    size_t pos = r.text.find(s, from);
    if (pos != std::string::npos && pos < best) best = pos;
  }
  if (best != std::string::npos) {
    r.text.resize(best);
    r.stopped_by_string = true;
  }
  (void)seq;
}

void LLMEngine::push_delta(Request& r, bool final_delta) {
  StreamDelta d;
  d.request_id = r.output_id;
  d.index = r.index;
  d.token_ids.assign(r.out_tokens.begin() + long(r.streamed_tokens), r.out_tokens.end());
  r.streamed_tokens = r.out_tokens.size();
  d.logprobs.assign(r.logprobs.begin() + long(r.streamed_logprobs), r.logprobs.end());
  r.streamed_logprobs = r.logprobs.size();
  size_t upto = r.text.size();
  if (!final_delta && !r.params.stop.empty()) {
    // Hold back a possible stop-string prefix, on a UTF-8 character boundary.
    size_t max_stop = 0;
    for (const auto& s : r.params.stop) max_stop = std::max(max_stop, s.size());
    upto = upto > max_stop - 1 ? upto - (max_stop - 1) : 0;
    while (upto > r.streamed_text && (static_cast<unsigned char>(r.text[upto]) & 0xC0) == 0x80) --upto;
  }
  if (upto > r.streamed_text) {
    d.text = r.text.substr(r.streamed_text, upto - r.streamed_text);
    r.streamed_text = upto;
  }
  d.finished = final_delta;
  d.finish_reason = final_delta ? r.finish_reason : "";
  d.error = r.error;
  d.num_prompt_tokens = int(r.prompt_ids.size());
  d.num_generated_tokens = int(r.out_tokens.size());
  if (d.token_ids.empty() && d.text.empty() && !final_delta) return;
  deltas_.push_back(std::move(d));
}

RequestOutput LLMEngine::make_output(Request& r, const Sequence* seq) {
  RequestOutput o;
  o.request_id = r.output_id;
  o.index = r.index;
  o.prompt_token_ids = r.prompt_ids;
  o.token_ids = r.out_tokens;
  o.text = r.text;
  o.finished = true;
  o.finish_reason = r.finish_reason;
  o.error = r.error;
  o.num_cached_tokens = r.num_cached_tokens;
  o.logprobs = r.logprobs;
  (void)seq;
  return o;
}

void LLMEngine::finish_request(uint64_t id, const std::string& reason,
                               std::vector<RequestOutput>& out) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request& r = *it->second;
  r.finished = true;
  r.finish_reason = reason;
  if (r.detok && !r.stopped_by_string) r.text += r.detok->finish();
  if (reason == "abort") stats_.aborted_requests++;
  else stats_.finished_requests++;
  if (tracer_ && r.index == 0) tracer_->finished(r.output_id, reason);
  out.push_back(make_output(r, nullptr));
  if (r.stream) push_delta(r, true);
  requests_.erase(it);
}

std::vector<RequestOutput> LLMEngine::step() {
  std::vector<RequestOutput> out;
  out.swap(pending_failed_);
  if (scheduler_->is_finished()) {
    refresh_stats();
    return out;
  }
  auto t0 = std::chrono::steady_clock::now();
  if (tracer_) tracer_->step_begin();
  std::vector<uint64_t> was_waiting;
  for (const Sequence* s : scheduler_->waiting()) was_waiting.push_back(s->seq_id);

  SchedulerOutput so = scheduler_->schedule();
  if (so.empty()) {
    refresh_stats();
    return out;
  }
  if (tracer_) tracer_->scheduled(so, *scheduler_);
  // Prefix-cache accounting for sequences admitted in this step.
  for (const auto& ss : so.seqs) {
    if (std::find(was_waiting.begin(), was_waiting.end(), ss.seq->seq_id) == was_waiting.end())
      continue;
    if (ss.seq->status != SequenceStatus::RUNNING) continue;
    stats_.prefix_cache_hit_tokens += ss.seq->num_prefix_hit_tokens;
    stats_.prefix_cache_query_tokens += ss.seq->size();
    auto it = requests_.find(ss.seq->seq_id);
    if (it != requests_.end() && it->second->out_tokens.empty() && it->second->index == 0) {
      it->second->num_cached_tokens = ss.seq->num_prefix_hit_tokens;
      stats_.prompt_tokens += ss.seq->num_prompt_tokens;
    }
  }

  HostBatch hb = runner_->prepare(so);
  if (tracer_) tracer_->mark(StepMark::kPrepared);
  Tensor logits = runner_->run(hb);  // on CUDA only enqueued: the rows below overlap the GPU
  if (tracer_) {  // the forward's device time belongs to "forward", not to "sample"
    runner_->backend().synchronize();
    tracer_->mark(StepMark::kForwarded);
  }

  SamplingBatch batch;
  std::vector<Sequence*> sampled;
  for (const auto& ss : so.seqs) {
    if (!ss.sample) continue;
    Sequence* s = ss.seq;
    auto it = requests_.find(s->seq_id);
    NV_CHECK(it != requests_.end(), "scheduled sequence ", s->seq_id, " has no request");
    Request& r = *it->second;
    batch.rows.push_back(r.sampling->row(s->num_completion_tokens()));
    if (r.grammar) batch.rows.back().allowed = r.grammar->allowed();
    sampled.push_back(s);
  }
  const SampleResult res = runner_->backend().sample(logits, batch);
  if (tracer_) tracer_->mark(StepMark::kSampled);
  const std::vector<int>& tokens = res.tokens;
  const int S = int(tokens.size());
  // n > 1: the prompt KV of a first completion is computed now; fork the others from it.
  for (Sequence* s : sampled) {
    Request& r = *requests_.at(s->seq_id);
    if (!r.group.empty() && s->num_completion_tokens() == 0) fork_completions(r, *s);
  }

  std::vector<std::unique_ptr<Sequence>> finished = scheduler_->postprocess(so, tokens);
  for (int i = 0; i < S; ++i) {
    Request& r = *requests_.at(sampled[size_t(i)]->seq_id);
    const TokenLogprobs* lp = r.params.logprobs >= 0 ? &res.logprobs[size_t(i)] : nullptr;
    on_token(r, *sampled[size_t(i)], tokens[size_t(i)], lp);
  }
  std::vector<uint64_t> done_ids;
  for (auto& f : finished) {
    auto it = requests_.find(f->seq_id);
    if (it == requests_.end()) continue;
    const bool stopped = it->second->stopped_by_string || it->second->stopped_by_grammar;
    std::string reason = !it->second->error.empty() ? "error" : stopped ? "stop" : f->finish_reason;
    finish_request(f->seq_id, reason.empty() ? "stop" : reason, out);
    done_ids.push_back(f->seq_id);
  }
  // Stop strings found in sequences the scheduler still runs: finish them now (frees blocks).
  for (Sequence* s : sampled) {
    auto it = requests_.find(s->seq_id);
    if (it == requests_.end()) continue;
    if (it->second->stopped_by_string || it->second->stopped_by_grammar) {
      const char* reason = it->second->error.empty() ? "stop" : "error";
      auto owned = scheduler_->finish(s->seq_id, reason);
      finish_request(s->seq_id, reason, out);
    } else if (it->second->stream) {
      push_delta(*it->second, false);
    }
  }

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  last_step_ = StepStats{};
  last_step_.num_seqs = int(so.seqs.size());
  last_step_.num_prefill_tokens = so.num_prefill_tokens;
  last_step_.num_decode_tokens = so.num_decode_tokens;
  last_step_.num_preempted = so.num_preempted;
  last_step_.seconds = secs;
  stats_.steps++;
  stats_.prefill_tokens += so.num_prefill_tokens;
  stats_.decode_tokens += so.num_decode_tokens;
  stats_.preemptions += so.num_preempted;
  stats_.max_batch_size = std::max(stats_.max_batch_size, int(so.seqs.size()));
  if (so.num_prefill_tokens > 0) stats_.prefill_seconds += secs;
  else stats_.decode_seconds += secs;
  refresh_stats();
  last_step_.num_blocks_used = stats_.num_blocks_used;
  if (tracer_) tracer_->step_end(so, *scheduler_);
  return out;
}

void LLMEngine::refresh_stats() {
  stats_.num_blocks_used = scheduler_->block_manager().num_used_blocks();
  stats_.peak_blocks_used = std::max(stats_.peak_blocks_used, stats_.num_blocks_used);
  stats_.num_running = int(scheduler_->num_running());
  stats_.num_waiting = int(scheduler_->num_waiting());
  stats_.graph_steps = runner_->executor().graph_steps();
}

bool LLMEngine::is_finished() const { return scheduler_->is_finished() && pending_failed_.empty(); }

void LLMEngine::abort(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second->index != 0) return;
  std::vector<uint64_t> ids = it->second->group;
  if (ids.empty()) ids.push_back(id);
  for (uint64_t rid : ids) {
    if (!requests_.count(rid)) continue;
    auto owned = scheduler_->finish(rid, "abort");
    finish_request(rid, "abort", pending_failed_);
  }
  refresh_stats();
}

std::vector<StreamDelta> LLMEngine::take_stream_deltas() {
  std::vector<StreamDelta> d;
  d.swap(deltas_);
  return d;
}

std::vector<RequestOutput> LLMEngine::generate(const std::vector<Prompt>& prompts,
                                               const std::vector<SamplingParams>& params,
                                               bool progress) {
  NV_CHECK(params.size() == 1 || params.size() == prompts.size(), "generate: ", params.size(),
           " sampling params for ", prompts.size(), " prompts (give one or one per prompt)");
  // Outputs keyed by (request id, index): a request with n > 1 gives n, in index order.
  std::vector<std::pair<uint64_t, int>> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const SamplingParams& p = params.size() == 1 ? params[0] : params[i];
    const uint64_t id = add_request(prompts[i], p, false);
    for (int k = 0; k < p.n; ++k) ids.emplace_back(id, k);
  }
  std::map<std::pair<uint64_t, int>, RequestOutput> done;
  ProgressBar bar("generate", int64_t(prompts.size()), progress);
  int64_t p0 = stats_.prefill_tokens, d0 = stats_.decode_tokens;
  double ps0 = stats_.prefill_seconds, ds0 = stats_.decode_seconds;
  while (done.size() < ids.size()) {
    for (auto& o : step()) done[{o.request_id, o.index}] = std::move(o);
    if (progress) {
      char buf[128];
      double ps = stats_.prefill_seconds - ps0, ds = stats_.decode_seconds - ds0;
      std::snprintf(buf, sizeof buf, "prefill %.0f tok/s decode %.0f tok/s",
                    ps > 0 ? double(stats_.prefill_tokens - p0) / ps : 0.0,
                    ds > 0 ? double(stats_.decode_tokens - d0) / ds : 0.0);
      bar.update(int64_t(done.size()), buf);
    }
    if (done.size() < ids.size() && is_finished()) break;  // defensive: never spin
  }
  bar.finish();
  std::vector<RequestOutput> out;
  for (const auto& id : ids) {
    auto it = done.find(id);
    if (it == done.end() && id.second > 0) continue;  // the request failed before forking
    NV_CHECK(it != done.end(), "request ", id.first, " did not finish");
    out.push_back(std::move(it->second));
  }
  return out;
}

std::string LLMEngine::apply_chat_template(const std::string& messages_json,
                                           bool add_generation_prompt,
                                           const std::string& extra_kwargs_json) const {
  NV_CHECK(tokenizer_ && !tokenizer_->chat_template().empty(),
           "the model's tokenizer_config.json has no chat_template");
  nlohmann::json messages = parse_json(messages_json, "chat messages");
  nlohmann::json extra = parse_json(extra_kwargs_json.empty() ? "{}" : extra_kwargs_json, "chat template kwargs");
  nlohmann::json tools = nullptr;
  if (extra.contains("tools")) {
    tools = extra["tools"];
    extra.erase("tools");
  }
  return nanovllm::apply_chat_template(tokenizer_->chat_template(), messages, add_generation_prompt,
                                       extra, tokenizer_->bos_token(), tokenizer_->eos_token(), tools);
}

}  // namespace nanovllm
