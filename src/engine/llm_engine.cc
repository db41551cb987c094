#include "engine/llm_engine.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "chat/chat_template.h"
#include "engine/draft_setup.h"
#include "engine/model_files.h"
#include "spec/ngram_proposer.h"
#include "util/json_bounded.h"
#include "util/progress.h"

namespace nanovllm {

namespace fs = std::filesystem;

LLMEngine::LLMEngine(const Config& config) : config_(config) {
  // Every field checked (errors name it), every string parsed, every `auto` settled.
  ResolvedConfig resolved = resolve(config_);
  check_model_path(config_.model);
  mc_ = ModelConfig::from_dir(config_.model);
  config_.max_model_len = std::min(config_.max_model_len, mc_.max_context_len());
  resolved.spec.max_model_len = config_.max_model_len;
  tokenizer_ = load_model_tokenizer(config_.model);

  // EOS: generation_config.json / tokenizer_config.json (via the tokenizer), then config.json.
  if (tokenizer_) eos_ids_ = tokenizer_->eos_token_ids();
  think_tokens_ = ThinkTokens::from(tokenizer_.get());
  for (int id : mc_.eos_token_ids)
    if (std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) eos_ids_.push_back(id);

  if (tokenizer_)
    structured_ = std::make_unique<StructuredDecoding>(
        *tokenizer_, eos_ids_, mc_.vocab_size,
        chat::tool_call_format_for_template(tokenizer_->chat_template()));

  // A draft model's KV cache takes its share of the budget (as many blocks as ours).
  std::optional<DraftPlan> draft;
  if (resolved.speculative == SpeculativeMethod::kDraft) {
    draft = plan_draft_model(resolved, mc_, tokenizer_.get());
    resolved.kv_extra_block_bytes = draft->block_bytes;
    resolved.kv_reserved_device_bytes = draft->weight_bytes;
  }
  runner_ = std::make_unique<ModelRunner>(resolved, mc_);
  config_ = resolved.settled();
  config_.num_kvcache_blocks = runner_->num_kvcache_blocks();
  // A sequence must always fit the cache alone, or it could be preempted forever.
  const int cache_tokens = config_.num_kvcache_blocks * config_.kvcache_block_size;
  if (config_.max_model_len > cache_tokens) {
    std::fprintf(stderr, "nanovllm: max_model_len lowered from %d to %d to fit the KV cache\n",
                 config_.max_model_len, cache_tokens);
    config_.max_model_len = cache_tokens;
  }
  // Embeddings: the task from Config::task, or (auto) the model's sentence-transformers files.
  std::optional<PoolingConfig> pc = PoolingConfig::from_dir(config_.model);
  if (config_.task == "embed" || (config_.task == "auto" && pc)) {
    pooling_ = pc.value_or(PoolingConfig{});
    NV_CHECK(config_.tensor_parallel_size == 1, "--task embed runs on one rank (tensor_parallel_size 1)");
    NV_CHECK(resolved.speculative == SpeculativeMethod::kNone, "--task embed has nothing to speculate (--speculative none)");
    // Pooling reads every prompt row it needs from this forward: no prefix-cache reuse.
    config_.enable_prefix_caching = false;
  }
  config_.task = pooling_ ? "embed" : "generate";
  const SchedulePolicy policy = resolved.policy;
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
  sc.priority = config_.scheduling_policy == "priority";
  sc.enable_prefix_caching = config_.enable_prefix_caching;
  scheduler_ = std::make_unique<Scheduler>(sc);
  stop_ = std::make_unique<StopChecker>(eos_ids_, scheduler_->max_seq_len());
  step_outputs_ = std::make_shared<EventQueue>();
  stats_ = std::make_unique<StatsRecorder>(config_.num_kvcache_blocks,
                                           runner_->backend().num_threads(), runner_->executor());
  if (!config_.trace_path.empty()) tracer_ = std::make_unique<EngineTracer>(config_.trace_path, config_);
  if (resolved.speculative != SpeculativeMethod::kNone) {
    SpecOptions so;
    so.num_speculative_tokens = config_.num_speculative_tokens;
    so.max_batch = resolved.speculative_max_batch;
    so.fixed_k = config_.speculative_fixed_k;
    std::unique_ptr<Proposer> proposer;
    if (draft) {
      draft->max_len = std::min(draft->max_len, config_.max_model_len + config_.num_speculative_tokens);
      proposer = make_draft_proposer(resolved, *draft, config_.num_kvcache_blocks);
    } else {
      proposer = std::make_unique<NgramProposer>(config_.ngram_min, config_.ngram_max);
    }
    spec_ = std::make_unique<SpecDecoder>(so, std::move(proposer));
  }
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

uint64_t LLMEngine::add_request(const Prompt& prompt, const SamplingParams& params,
                                std::shared_ptr<OutputSink> sink, bool stream,
                                const RequestOrigin* origin) {
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
  NV_CHECK(params.prompt_logprobs < 0 || config_.tensor_parallel_size == 1,
           "prompt_logprobs needs tensor_parallel_size 1");
  NV_CHECK(!pooling_ || params.prompt_logprobs < 0, "an embedding request has no prompt_logprobs");
  NV_CHECK(!pooling_ || params.n == 1, "an embedding request has one output (n = 1), got n = ", params.n);
  NV_CHECK(params.priority == 0 || config_.scheduling_policy == "priority",
           "priority ", params.priority, " needs the priority scheduling policy (--scheduling-policy priority)");
  const bool budget = params.thinking_budget >= 0 && params.structured_outputs.empty();
  NV_CHECK(!budget || think_tokens_.valid(),
           "thinking_budget needs a reasoning model (its tokenizer has no <think> / </think> tokens)");
  prepare_constraint(params.structured_outputs);

  // One Completion per n (sequence ids id .. id + n - 1); only completion 0 is scheduled now,
  // the others fork from it after its prefill (fork_completions).
  const uint64_t id = next_id_;
  next_id_ += uint64_t(params.n);
  auto owned = std::make_unique<Request>(id, params, stream, sink ? std::move(sink) : step_outputs_);
  Request& r = *owned;
  for (int i = 0; i < params.n; ++i) {
    auto c = std::make_unique<Completion>(r, i, id + uint64_t(i), ids, completion_seed(seed, i),
                                          config_.kvcache_block_size, eos_ids_, tokenizer_.get());
    c->held = i > 0;
    if (!params.structured_outputs.empty()) c->grammar = structured_->start(params.structured_outputs);
    c->embed = pooling_.has_value();
    if (budget) c->thinking = std::make_unique<ThinkingBudget>(params.thinking_budget, think_tokens_, ids, mc_.vocab_size);
    r.completions.push_back(std::move(c));
  }
  r.num_unfinished = params.n;
  if (params.prompt_logprobs >= 0 && !ids.empty()) r.prompt_logprobs.resize(ids.size() - 1);
  requests_.emplace(id, std::move(owned));
  if (tracer_) {
    tracer_->arrived(id, r.completions[0]->seq.num_prompt_tokens);
    if (tracer_->records_requests()) {  // the resolved seed: a replay samples the same tokens
      SamplingParams resolved = params;
      resolved.seed = seed;
      tracer_->record_request(id, ids, resolved, params.seed.has_value(), origin);
    }
  }
  try {
    scheduler_->add(&r.completions[0]->seq);
  } catch (const Error& e) {
    // The request can never run: every completion ends now with an "error" final event.
    for (auto& c : r.completions) {
      c->error = e.what();
      finish(*c, FinishReason::kError);
    }
  }
  return id;
}

void LLMEngine::fork_completions(Request& r) {
  Completion& parent = *r.completions[0];
  for (auto& c : r.completions) {
    if (!c->held) continue;
    c->held = false;
    scheduler_->block_manager().fork(parent.seq, c->seq);
    scheduler_->add(&c->seq);
  }
}

void LLMEngine::emit(Completion& c, bool final) {
  Request& r = c.request;
  if (!final && !r.stream) return;
  CompletionEvent e;
  if (!c.next_delta(final, e.delta)) return;
  if (final) {
    e.output = c.final_output();
    e.request_finished = r.finished();
  }
  r.sink->on_event(std::move(e));
}

void LLMEngine::finish(Completion& c, FinishReason reason) {
  NV_CHECK(!c.ended, "completion ", c.seq.seq_id, " finished twice");
  if (c.seq.is_finished()) {
    // Finished by the scheduler's postprocess, on StopChecker's decision (blocks already freed).
    NV_CHECK(c.seq.finish_reason == reason, "completion ", c.seq.seq_id, ": finish reason decided twice");
  } else {
    if (c.held) c.held = false;  // never reached the scheduler
    else scheduler_->finish(c.seq.seq_id, reason);  // frees its blocks now
    c.seq.status = SequenceStatus::FINISHED;
    c.seq.finish_reason = reason;
  }
  c.ended = true;
  if (spec_) spec_->release(c.seq.seq_id);  // a draft model's KV for it
  c.output.finish();
  stats_->finished(reason);
  if (tracer_) {
    tracer_->finished(c.seq.seq_id, finish_reason_name(reason));
    if (tracer_->records_requests()) tracer_->record_output(c.final_output());
  }
  Request& r = c.request;
  --r.num_unfinished;
  emit(c, true);
  if (r.finished()) {  // retire: alive until the step's end (its SchedulerOutput may point at it)
    auto it = requests_.find(r.id);
    retired_.push_back(std::move(it->second));
    requests_.erase(it);
  }
}

// One generation step after scheduling: forward, sampling rows (drafts included), the
// tokens through the scheduler and StopChecker, events.
void LLMEngine::sample_step(const SchedulerOutput& so) {
  HostBatch hb = runner_->prepare(so);
  if (tracer_) tracer_->mark(StepMark::kPrepared);
  Tensor prompt_hidden;  // prompt_logprobs rows (HostBatch::num_extra_rows)
  Tensor logits = runner_->run(hb, &prompt_hidden);  // on CUDA only enqueued: the rows below overlap the GPU
  if (tracer_) {  // the forward's device time belongs to "forward", not to "sample"
    runner_->backend().synchronize();
    tracer_->mark(StepMark::kForwarded);
  }
  // One sampling row per sampled logits row, in order: a sequence that samples has one, a
  // speculating one 1 + k (row i samples the token after its first i drafts, as if they
  // were generated: same Philox step, penalty history and grammar state as without
  // speculation, so every accepted token is the token plain decoding would sample).
  SamplingBatch batch;
  std::vector<Completion*> sampled;
  // Row spans view these buffers; growing the outer vectors moves the inner ones, which
  // keeps their heap buffers (and nothing is allocated in a step without drafts).
  std::vector<std::vector<TokenCount>> spec_history;
  std::vector<std::vector<std::vector<uint32_t>>> spec_masks;
  for (const ScheduledSeq& ss : so.seqs) {
    if (!ss.sample) continue;
    Completion& c = *ss.seq->owner;
    const int nc = c.seq.num_completion_tokens();
    if (ss.num_spec_tokens == 0) {
      batch.rows.push_back(c.sampling.row(nc));
      if (c.grammar) batch.rows.back().allowed = c.grammar->allowed();
      else if (c.thinking) batch.rows.back().allowed = c.thinking->allowed();
    } else {
      const std::span<const int> drafts(c.seq.spec_token_ids);
      if (c.grammar) c.grammar->masks_after(drafts, spec_masks.emplace_back());
      for (int i = 0; i <= ss.num_spec_tokens; ++i) {
        batch.rows.push_back(c.sampling.row_after(nc, drafts.first(size_t(i)), spec_history.emplace_back()));
        if (c.grammar) batch.rows.back().allowed = spec_masks.back()[size_t(i)];
        else if (c.thinking) batch.rows.back().allowed = c.thinking->allowed_after(drafts.first(size_t(i)));
      }
    }
    sampled.push_back(&c);
  }
  const SampleResult res = runner_->backend().sample(logits, batch);
  if (tracer_) tracer_->mark(StepMark::kSampled);
  if (hb.num_extra_rows > 0) record_prompt_logprobs(so, prompt_hidden);
  // n > 1: a first completion's prompt KV is computed now; fork the others from it.
  for (Completion* c : sampled)
    if (c->index == 0 && c->request.completions.size() > 1 && c->seq.num_completion_tokens() == 0)
      fork_completions(c->request);
  // Appends the tokens; StopChecker (check_stop) decides every token-driven finish, and the
  // scheduler frees a finished sequence's blocks at once.
  scheduler_->postprocess(so, res.tokens, [&](Sequence& seq, int token, size_t row) {
    return stop_->check(*seq.owner, token, row < res.logprobs.size() ? &res.logprobs[row] : nullptr);
  });
  if (spec_)
    for (const ScheduledSeq& ss : so.seqs) spec_->observe(*ss.seq, ss.num_spec_tokens);
  for (Completion* c : sampled) {
    if (c->finished()) finish(*c, c->seq.finish_reason);
    else emit(*c, false);
  }
}

// The prompt rows' logprobs of this step (before postprocess moves num_cached_tokens on), in
// prepare()'s order: each sequence's rows [first, first + count) score tokens first + 1 ...
void LLMEngine::record_prompt_logprobs(const SchedulerOutput& so, const Tensor& hidden) {
  std::vector<int> targets;
  int top_n = 0;  // the step's largest N; each request keeps its own
  for (const ScheduledSeq& ss : so.seqs) {
    const ModelRunner::PromptRows pr = ModelRunner::prompt_rows(ss);
    if (pr.count > 0) top_n = std::max(top_n, ss.seq->params.prompt_logprobs);
    for (int p = pr.first; p < pr.first + pr.count; ++p) targets.push_back(ss.seq->token_ids[size_t(p + 1)]);
  }
  std::vector<TokenLogprobs> lps = runner_->prompt_logprobs(hidden, targets, top_n);
  size_t i = 0;
  for (const ScheduledSeq& ss : so.seqs) {
    const ModelRunner::PromptRows pr = ModelRunner::prompt_rows(ss);
    Request& r = ss.seq->owner->request;
    for (int p = pr.first; p < pr.first + pr.count; ++p, ++i) {
      lps[i].top.resize(std::min(lps[i].top.size(), size_t(r.params.prompt_logprobs)));
      r.prompt_logprobs[size_t(p)] = std::move(lps[i]);
    }
  }
}

void LLMEngine::embed_step(const SchedulerOutput& so) {
  using Rows = ModelRunner::Rows;
  const Rows rows = pooling_->mode == PoolingConfig::Mode::kMean ? Rows::kMean
                    : pooling_->mode == PoolingConfig::Mode::kCls ? Rows::kCls
                                                                   : Rows::kLast;
  HostBatch hb = runner_->prepare(so, rows);
  if (tracer_) tracer_->mark(StepMark::kPrepared);
  const Tensor hidden = runner_->run_hidden(hb);  // [S, H] F32 on the host
  if (tracer_) tracer_->mark(StepMark::kForwarded);
  const int64_t H = hidden.size(-1);
  const float* h = hidden.data<float>();
  // Each sequence's rows, in order (prepare's rule): summed (mean) or kept (last, cls).
  int64_t row = 0;
  std::vector<int> tokens;
  for (const ScheduledSeq& ss : so.seqs) {
    Completion& c = *ss.seq->owner;
    const int n = ModelRunner::num_rows(ss, rows);
    // A chunk from position 0 starts the pooling over (a sequence preempted mid-prefill is
    // recomputed from its first token: its earlier rows must not count twice).
    if (c.pool_sum.empty() || ss.seq->num_cached_tokens == 0) {
      c.pool_sum.assign(size_t(H), 0.0);
      c.pool_rows = 0;
    }
    for (int r = 0; r < n; ++r, ++row)
      for (int64_t j = 0; j < H; ++j) c.pool_sum[size_t(j)] += double(h[row * H + j]);
    c.pool_rows += n;
    if (!ss.sample) continue;
    // The prompt is complete: mean = sum / rows; last and cls hold their one row.
    std::vector<float> e(static_cast<size_t>(H), 0.f);
    double norm = 0;
    for (int64_t j = 0; j < H; ++j) {
      e[size_t(j)] = float(c.pool_sum[size_t(j)] / std::max(1, c.pool_rows));
      norm += double(e[size_t(j)]) * double(e[size_t(j)]);
    }
    if (pooling_->normalize && norm > 0) {
      const float inv = float(1.0 / std::sqrt(norm));
      for (float& x : e) x *= inv;
    }
    c.embedding = std::move(e);
    c.pool_sum = {};
    tokens.push_back(0);  // a placeholder "token": the scheduler finishes the sequence with it
  }
  if (tracer_) tracer_->mark(StepMark::kSampled);
  // Finished prompts end now ("stop"); their blocks are freed by the scheduler.
  scheduler_->postprocess(so, tokens, [](Sequence&, int, size_t) { return FinishReason::kStop; });
  for (const ScheduledSeq& ss : so.seqs)
    if (ss.sample && ss.seq->owner->finished()) finish(*ss.seq->owner, ss.seq->finish_reason);
}

std::vector<RequestOutput> LLMEngine::step() {
  retired_.clear();  // finished outside a step (rejected, aborted)
  if (!scheduler_->is_finished()) {
    const auto t0 = std::chrono::steady_clock::now();
    if (tracer_) tracer_->step_begin();
    if (spec_) spec_->propose(scheduler_->running());  // drafts for the sequences that decode
    const SchedulerOutput so = scheduler_->schedule();
    if (!so.empty()) {
      if (tracer_) tracer_->scheduled(so, *scheduler_);
      for (Sequence* s : so.admitted) {
        if (s->num_completion_tokens() == 0) s->owner->num_cached_tokens = s->num_prefix_hit_tokens;
        stats_->admitted(*s);
      }
      if (pooling_) embed_step(so);
      else sample_step(so);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (spec_) spec_->observe_step(so.num_decode_tokens, so.num_spec_tokens, so.is_prefill, secs);
      stats_->step(so, secs, *scheduler_);
      if (tracer_) tracer_->step_end(so, *scheduler_);
      retired_.clear();  // nothing points at this step's finished sequences any more
    } else {
      stats_->refresh(*scheduler_);
    }
  } else {
    stats_->refresh(*scheduler_);
  }
  std::vector<RequestOutput> out;
  for (CompletionEvent& e : step_outputs_->take())
    if (e.output) out.push_back(std::move(*e.output));
  return out;
}

bool LLMEngine::is_finished() const { return scheduler_->is_finished() && step_outputs_->empty(); }

void LLMEngine::abort(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;  // finished, unknown, or a completion's own sequence id
  Request& r = *it->second;  // stays alive (retired_) when its last completion ends below
  for (auto& c : r.completions)
    if (!c->ended) finish(*c, FinishReason::kAbort);
  stats_->refresh(*scheduler_);
}

void LLMEngine::abort_all() {
  std::vector<uint64_t> ids;
  ids.reserve(requests_.size());
  for (const auto& [id, r] : requests_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());  // outputs in arrival order
  for (uint64_t id : ids) abort(id);
}

namespace {

// generate()'s sink: a request's final outputs into its slots of the result (slot base + index).
class SlotSink : public OutputSink {
 public:
  SlotSink(std::vector<RequestOutput>& slots, size_t base, size_t& requests_done)
      : slots_(slots), base_(base), done_(requests_done) {}
  void on_event(CompletionEvent&& e) override {
    if (e.output) slots_[base_ + size_t(e.output->index)] = std::move(*e.output);
    if (e.request_finished) ++done_;
  }

 private:
  std::vector<RequestOutput>& slots_;
  size_t base_;
  size_t& done_;
};

}  // namespace

std::vector<RequestOutput> LLMEngine::generate(const std::vector<Prompt>& prompts,
                                               const std::vector<SamplingParams>& params,
                                               bool progress) {
  NV_CHECK(params.size() == 1 || params.size() == prompts.size(), "generate: ", params.size(),
           " sampling params for ", prompts.size(), " prompts (give one or one per prompt)");
  // Outputs in prompt order; a request with n > 1 fills n consecutive slots, in index order.
  size_t total = 0;
  for (size_t i = 0; i < prompts.size(); ++i) total += size_t((params.size() == 1 ? params[0] : params[i]).n);
  std::vector<RequestOutput> out(total);
  size_t done = 0, base = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const SamplingParams& p = params.size() == 1 ? params[0] : params[i];
    add_request(prompts[i], p, std::make_shared<SlotSink>(out, base, done), false);
    base += size_t(p.n);
  }
  ProgressBar bar("generate", int64_t(prompts.size()), progress);
  const EngineStats& st = stats();
  int64_t p0 = st.prefill_tokens, d0 = st.decode_tokens;
  double ps0 = st.prefill_seconds, ds0 = st.decode_seconds;
  while (done < prompts.size()) {
    (void)step();
    if (progress) {
      char buf[128];
      double ps = st.prefill_seconds - ps0, ds = st.decode_seconds - ds0;
      std::snprintf(buf, sizeof buf, "prefill %.0f tok/s decode %.0f tok/s",
                    ps > 0 ? double(st.prefill_tokens - p0) / ps : 0.0,
                    ds > 0 ? double(st.decode_tokens - d0) / ds : 0.0);
      bar.update(int64_t(done), buf);
    }
    NV_CHECK(done == prompts.size() || !scheduler_->is_finished(), "generate: the engine is idle with ",
             prompts.size() - done, " requests unfinished");  // defensive: never spin
  }
  bar.finish();
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
