#include "engine/llm_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>

#include "tokenizer/chat_template.h"
#include "util/json_bounded.h"
#include "util/progress.h"

namespace nanovllm {

namespace fs = std::filesystem;

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
  const SchedulePolicy policy = parse_schedule_policy(config_.policy);
  NV_CHECK(policy != SchedulePolicy::kPrefillFirst ||
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
  sc.policy = policy;
  sc.enable_prefix_caching = config_.enable_prefix_caching;
  sc.eos_token_ids = eos_ids_;
  scheduler_ = std::make_unique<Scheduler>(sc);
  stats_ = std::make_unique<StatsRecorder>(config_.num_kvcache_blocks,
                                           runner_->backend().num_threads(), runner_->executor());
  if (!config_.trace_path.empty()) tracer_ = std::make_unique<EngineTracer>(config_.trace_path, config_);
}

LLMEngine::~LLMEngine() {
  if (tracer_) tracer_->close(stats());
}

size_t LLMEngine::weight_bytes() const { return runner_->model().weight_bytes(); }

std::vector<int> LLMEngine::prompt_token_ids(const Prompt& prompt) const {
  std::vector<int> ids;
  if (auto* text = std::get_if<std::string>(&prompt.value)) {
    NV_CHECK(tokenizer_ != nullptr, "text prompt given but the model directory has no "
             "tokenizer.json; pass token ids");
    ids = tokenizer_->encode(*text, prompt.add_special_tokens);
  } else {
    ids = std::get<std::vector<int>>(prompt.value);
  }
  for (int id : ids)
    NV_CHECK(id >= 0 && id < mc_.vocab_size, "prompt token id ", id, " is outside the vocabulary [0, ",
             mc_.vocab_size, ")");
  return ids;
}

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
  std::vector<int> ids = prompt_token_ids(prompt);
  for (const auto& [id, bias] : params.logit_bias)
    NV_CHECK(id < mc_.vocab_size, "logit_bias token id ", id, " is outside the vocabulary [0, ",
             mc_.vocab_size, ")");
  NV_CHECK(params.stop.empty() || tokenizer_, "stop strings need a tokenizer");
  prepare_constraint(params.structured_outputs);

  // One Request per completion (consecutive ids); only completion 0 is scheduled now, the
  // others fork from it after its prefill (fork_completions).
  const uint64_t output_id = next_id_;
  std::vector<Request*> group;
  for (int i = 0; i < params.n; ++i) {
    const uint64_t id = next_id_++;
    auto owned = std::make_unique<Request>(id, ids, params, completion_seed(seed, i),
                                           config_.kvcache_block_size, eos_ids_, tokenizer_.get(),
                                           stream);
    owned->output_id = output_id;
    owned->index = i;
    owned->held = i > 0;
    if (!params.structured_outputs.empty()) owned->grammar = structured_->start(params.structured_outputs);
    group.push_back(owned.get());
    requests_.emplace(id, std::move(owned));
  }
  if (params.n > 1)
    for (Request* r : group) group[0]->group.push_back(r->id);
  Request& r = *group[0];
  if (tracer_) tracer_->arrived(output_id, r.seq.num_prompt_tokens);
  try {
    scheduler_->add(&r.seq);
  } catch (const Error& e) {
    // The request can never run: every completion is reported as a finished error output
    // (and final delta) on the next step().
    for (Request* c : group) {
      c->seq.status = SequenceStatus::FINISHED;
      c->seq.finish_reason = FinishReason::kError;
      c->error = e.what();
      finish_request(*c, pending_outputs_);
    }
  }
  return output_id;
}

void LLMEngine::fork_completions(Request& parent) {
  for (uint64_t id : parent.group) {
    auto it = requests_.find(id);
    if (it == requests_.end() || !it->second->held) continue;
    Request& child = *it->second;
    child.held = false;
    scheduler_->block_manager().fork(parent.seq, child.seq);
    scheduler_->add(&child.seq);
  }
}

Request& LLMEngine::request_of(const Sequence& seq) {
  auto it = requests_.find(seq.seq_id);
  NV_CHECK(it != requests_.end(), "scheduled sequence ", seq.seq_id, " has no request");
  return *it->second;
}

void LLMEngine::push_delta(Request& r, bool final) {
  StreamDelta d;
  if (r.next_delta(final, d)) deltas_.push_back(std::move(d));
}

void LLMEngine::finish_request(Request& r, std::vector<RequestOutput>& out) {
  r.output.finish();
  stats_->finished(r.seq.finish_reason);
  if (tracer_) tracer_->finished(r.id, finish_reason_name(r.seq.finish_reason));
  out.push_back(r.final_output());
  if (r.stream) push_delta(r, true);
  auto it = requests_.find(r.id);
  retired_.push_back(std::move(it->second));
  requests_.erase(it);
}

std::vector<RequestOutput> LLMEngine::step() {
  std::vector<RequestOutput> out;
  out.swap(pending_outputs_);
  retired_.clear();  // finished outside a step (rejected, aborted)
  if (scheduler_->is_finished()) {
    stats_->refresh(*scheduler_);
    return out;
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (tracer_) tracer_->step_begin();
  const SchedulerOutput so = scheduler_->schedule();
  if (so.empty()) {
    stats_->refresh(*scheduler_);
    return out;
  }
  if (tracer_) tracer_->scheduled(so, *scheduler_);
  for (Sequence* s : so.admitted) {
    Request& r = request_of(*s);
    if (s->num_completion_tokens() == 0) r.num_cached_tokens = s->num_prefix_hit_tokens;
    stats_->admitted(*s);
  }

  HostBatch hb = runner_->prepare(so);
  if (tracer_) tracer_->mark(StepMark::kPrepared);
  Tensor logits = runner_->run(hb);  // on CUDA only enqueued: the rows below overlap the GPU
  if (tracer_) {  // the forward's device time belongs to "forward", not to "sample"
    runner_->backend().synchronize();
    tracer_->mark(StepMark::kForwarded);
  }

  // One sampling row per sequence that samples, in logits-row order.
  SamplingBatch batch;
  std::vector<Request*> sampled;
  for (const ScheduledSeq& ss : so.seqs) {
    if (!ss.sample) continue;
    Request& r = request_of(*ss.seq);
    batch.rows.push_back(r.sampling.row(r.seq.num_completion_tokens()));
    if (r.grammar) batch.rows.back().allowed = r.grammar->allowed();
    sampled.push_back(&r);
  }
  const SampleResult res = runner_->backend().sample(logits, batch);
  if (tracer_) tracer_->mark(StepMark::kSampled);
  // n > 1: a first completion's prompt KV is computed now; fork the others from it.
  for (Request* r : sampled)
    if (!r->group.empty() && r->seq.num_completion_tokens() == 0) fork_completions(*r);

  // Appends the tokens; EOS, stop tokens and length finish sequences (blocks freed at once).
  scheduler_->postprocess(so, res.tokens);
  for (size_t i = 0; i < sampled.size(); ++i) {
    Request& r = *sampled[i];
    const int token = res.tokens[i];
    r.sampling.on_token(token);
    if (r.output.on_token(token, r.params.logprobs >= 0 ? &res.logprobs[i] : nullptr)) {
      // A stop string: finish now (frees the blocks); it wins over a reason the scheduler gave.
      if (!r.finished()) scheduler_->finish(r.id, FinishReason::kStop);
      r.seq.finish_reason = FinishReason::kStop;
    }
    if (r.grammar) {
      // The grammar's end (EOS taken, or nothing but EOS allowed) finishes the request, EOS
      // ignored or not. A token the grammar refuses would be a bug of the mask: it ends this
      // request with an error rather than the engine with an exception.
      FinishReason reason = FinishReason::kStop;
      if (!r.grammar->accept(token)) {
        r.error = "internal error: sampled token " + std::to_string(token) + " is outside the output constraint";
        reason = FinishReason::kError;
      }
      if (reason == FinishReason::kError || r.grammar->done()) {
        if (!r.finished()) scheduler_->finish(r.id, reason);
        r.seq.finish_reason = reason;
      }
    }
    if (r.finished()) finish_request(r, out);
    else if (r.stream) push_delta(r, false);
  }

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_->step(so, secs, *scheduler_);
  if (tracer_) tracer_->step_end(so, *scheduler_);
  retired_.clear();  // nothing points at this step's finished sequences any more
  return out;
}

bool LLMEngine::is_finished() const { return scheduler_->is_finished() && pending_outputs_.empty(); }

void LLMEngine::abort(uint64_t id) {
  // `id` is the request's output id (its completion 0's id). While completion 0 is live its
  // group lists every completion (the server aborts each live request at shutdown: this stays
  // O(n)). Once it has finished, siblings of an n > 1 request may still run: found by output_id.
  std::vector<uint64_t> ids;
  if (auto it = requests_.find(id); it != requests_.end()) {
    if (it->second->index != 0) return;  // a sibling's own id is not a request id
    ids = it->second->group;
    if (ids.empty()) ids.push_back(id);
  } else {
    for (const auto& [rid, r] : requests_)
      if (r->output_id == id) ids.push_back(rid);
    std::sort(ids.begin(), ids.end());  // outputs in completion order
  }
  for (uint64_t rid : ids) {
    auto r = requests_.find(rid);
    if (r == requests_.end()) continue;
    if (r->second->held) r->second->seq.status = SequenceStatus::FINISHED;  // never scheduled
    else scheduler_->finish(rid, FinishReason::kAbort);
    r->second->seq.finish_reason = FinishReason::kAbort;
    finish_request(*r->second, pending_outputs_);
  }
  stats_->refresh(*scheduler_);
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
  const EngineStats& st = stats();
  int64_t p0 = st.prefill_tokens, d0 = st.decode_tokens;
  double ps0 = st.prefill_seconds, ds0 = st.decode_seconds;
  while (done.size() < ids.size()) {
    for (auto& o : step()) done[{o.request_id, o.index}] = std::move(o);
    if (progress) {
      char buf[128];
      double ps = st.prefill_seconds - ps0, ds = st.decode_seconds - ds0;
      std::snprintf(buf, sizeof buf, "prefill %.0f tok/s decode %.0f tok/s",
                    ps > 0 ? double(st.prefill_tokens - p0) / ps : 0.0,
                    ds > 0 ? double(st.decode_tokens - d0) / ds : 0.0);
      bar.update(int64_t(done.size()), buf);
    }
    if (done.size() < ids.size() && is_finished()) break;  // defensive: never spin
  }
  bar.finish();
  std::vector<RequestOutput> out;
  for (const auto& id : ids) {
    auto it = done.find(id);
    NV_CHECK(it != done.end(), "request ", id.first, " (completion ", id.second, ") did not finish");
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
