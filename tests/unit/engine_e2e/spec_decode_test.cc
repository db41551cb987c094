// Speculative decoding (--speculative ngram) is exact: on the CPU backend (batch-invariant, a
// counter-based sampler) every request generates exactly the tokens, logprobs, text and finish
// reason it generates without speculation, greedy or sampled, whatever the policy, K, batch,
// preemption, prefix hits, n, stop conditions, penalties or grammar. The random tiny Qwen3
// model's greedy output falls into loops (drafts accepted) and leaves the repeated prompt
// patterns below (drafts rejected), so both paths of the verification run.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "nanovllm/llm.h"
#include "random_model.h"
#include "spec_test_util.h"
#include "util/check.h"

using namespace nanovllm;

using namespace nanovllm::spec_test;

// Greedy over 8 prompts at once and one at a time, both policies (mixed with a 24-token budget:
// chunked prefills share steps with verifications), K = 1 and 7.
TEST(SpecDecode, GreedyIsTokenIdenticalAcrossPoliciesAndK) {
  const auto prompts = repeating_prompts(8, 1);
  for (const char* policy : {"prefill-first", "mixed"}) {
    Config c = spec_base();
    c.policy = policy;
    if (c.policy == "mixed") c.max_num_batched_tokens = 24;
    const SpecRun ref = generate(c, prompts, {greedy(tokens(32))});
    EXPECT_EQ(ref.stats.spec_draft_tokens, 0);
    for (int k : {1, 7}) {  // 8 x (1 + 7) = 64 rows: within the f32 streaming kernels
      if (kSanitized && k == 1) continue;
      const std::string what = std::string(policy) + " K=" + std::to_string(k);
      const SpecRun got = generate(with_spec(c, k), prompts, {greedy(tokens(32))});
      expect_identical(ref, got, what);
      expect_both_paths(got.stats, what);
      EXPECT_LT(got.stats.steps, ref.stats.steps) << what << ": accepted drafts save steps";
    }
  }
  // One request alone, K = 4, against the batch of 8 without speculation.
  Config c = spec_base();
  const SpecRun ref = generate(c, prompts, {greedy(tokens(32))});
  for (size_t i = 0; i < 2; ++i) {
    const SpecRun got = generate(with_spec(c), {prompts[i]}, {greedy(tokens(32))});
    EXPECT_EQ(got.outputs[0].token_ids, ref.outputs[i].token_ids) << "prompt " << i << " alone";
  }
}

// A cache of 10 blocks of 16 tokens for 8 sequences growing to ~60 tokens: sequences are
// preempted and recomputed (drafts never preempt anyone; they use only free blocks).
TEST(SpecDecode, PreemptionKeepsOutputs) {
  const auto prompts = repeating_prompts(8, 2);
  const SpecRun ref = generate(spec_base(), prompts, {greedy(tokens(48))});
  for (const char* policy : {"prefill-first", "mixed"}) {
    Config c = spec_base();
    c.policy = policy;
    c.num_kvcache_blocks = 10;
    c.max_num_batched_tokens = 512;
    const SpecRun got = generate(with_spec(c, 6), prompts, {greedy(tokens(48))});
    expect_identical(ref, got, std::string("preemption, ") + policy);
    EXPECT_GT(got.stats.preemptions, 0) << policy << ": the cache was meant to be too small";
    EXPECT_GT(got.stats.spec_accepted_tokens, 0) << policy;
  }
}

// An int8 KV cache: verification rows (K + 1 queries of a sequence) compute what plain decoding
// computes, as with the other cache types; with preemption and chunked prefill (mixed policy).
TEST(SpecDecode, Int8KvCacheIsIdentical) {
  const auto prompts = repeating_prompts(8, 2);
  Config base = spec_base();
  base.kv_cache_dtype = "int8";
  const SpecRun ref = generate(base, prompts, {greedy(tokens(40))});
  for (const char* policy : {"prefill-first", "mixed"}) {
    Config c = base;
    c.policy = policy;
    c.num_kvcache_blocks = 10;
    c.max_num_batched_tokens = c.policy == "mixed" ? 24 : 512;
    const SpecRun got = generate(with_spec(c, 4), prompts, {greedy(tokens(40))});
    expect_identical(ref, got, std::string("int8 cache, ") + policy);
    EXPECT_GT(got.stats.spec_accepted_tokens, 0) << policy;
  }
}

// Prompts sharing long prefixes, run twice on one engine: the second round hits the blocks the
// first one registered, among them blocks that accepted drafts filled. A rejected draft never
// reaches the prefix cache: a hit on a block holding one would change the second round.
TEST(SpecDecode, PrefixCacheHitsKeepOutputs) {
  auto prompts = repeating_prompts(6, 3);
  std::vector<int> shared;
  for (int i = 0; i < 40; ++i) shared.push_back(500 + 7 * (i % 9));
  for (auto& p : prompts) p.insert(p.begin(), shared.begin(), shared.end());
  const SpecRun ref = generate(spec_base(), prompts, {greedy(tokens(64))});
  LLM llm(with_spec(spec_base(), 5));
  std::vector<Prompt> ps(prompts.begin(), prompts.end());
  for (int round = 0; round < 2; ++round) {
    SpecRun got;
    got.outputs = llm.generate(ps, {greedy(tokens(64))});
    expect_identical(ref, got, "round " + std::to_string(round));
  }
  // Round 2 also asks for round 1's outputs as prompts: full blocks of generated (accepted) tokens hit.
  std::vector<Prompt> grown;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int> p = prompts[i];
    p.insert(p.end(), ref.outputs[i].token_ids.begin(), ref.outputs[i].token_ids.end());
    grown.emplace_back(p);
  }
  const int64_t hits0 = llm.stats().prefix_cache_hit_tokens;
  const auto out = llm.generate(grown, {greedy(tokens(8))});
  EXPECT_GT(llm.stats().prefix_cache_hit_tokens - hits0, 0);
  const SpecRun ref2 = [&] {
    LLM plain(spec_base());
    SpecRun r;
    r.outputs = plain.generate(grown, {greedy(tokens(8))});
    return r;
  }();
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].token_ids, ref2.outputs[i].token_ids) << i;
  EXPECT_GT(llm.stats().spec_accepted_tokens, 0);
  EXPECT_EQ(llm.stats().num_blocks_used, 0);
}

// Seeded sampling with every sampling parameter that reads the position or the history: the
// Philox step of row i is the output position, the penalty history counts the drafts before
// it, min_tokens suppresses by position. Identical tokens and logprobs (bitwise: 8 sequences of
// at most 1 + 6 rows stay within the CPU's streaming-GEMM regime of <= 64 rows a step, where
// f32 weights are batch-invariant; above it f32 weights go to BLAS, see docs/speculative.md;
// AVX-512 CPUs: logprobs within a bound, see expect_identical).
TEST(SpecDecode, SeededSamplingIsIdentical) {
  const auto prompts = repeating_prompts(8, 4);
  std::vector<SamplingParams> params;
  for (int i = 0; i < 8; ++i) {
    SamplingParams sp;
    sp.seed = 1000 + uint64_t(i);
    sp.max_tokens = tokens(40);
    sp.temperature = i % 2 ? 0.3f : 1.0f;
    sp.logprobs = 2;
    if (i % 3 == 0) sp.top_k = 20;
    if (i % 3 == 1) sp.top_p = 0.8f;
    if (i % 4 == 2) sp.min_p = 0.05f;
    if (i == 1) sp.repetition_penalty = 1.3f;
    if (i == 3) sp.frequency_penalty = 0.5f;
    if (i == 5) sp.presence_penalty = 0.7f;
    if (i == 6) sp.logit_bias = {{prompts[6][0], 3.0f}};
    if (i == 7) sp.min_tokens = 10;
    params.push_back(sp);
  }
  const SpecRun ref = generate(spec_base(), prompts, params);
  for (int k : {2, 6}) {
    if (kSanitized && k == 2) continue;
    const SpecRun got = generate(with_spec(spec_base(), k), prompts, params);
    expect_identical(ref, got, "sampled K=" + std::to_string(k));
    EXPECT_GT(got.stats.spec_accepted_tokens, 0);
  }
}

// n = 3 sampled completions per prompt (forked after the first's prefill), each speculating.
TEST(SpecDecode, NGreaterThanOneIsIdentical) {
  const auto prompts = repeating_prompts(3, 5);
  SamplingParams sp;
  sp.n = 3;
  sp.seed = 42;
  sp.temperature = 0.5f;
  sp.max_tokens = tokens(32);
  sp.ignore_eos = true;
  const SpecRun ref = generate(spec_base(), prompts, {sp});
  const SpecRun got = generate(with_spec(spec_base()), prompts, {sp});
  expect_identical(ref, got, "n=3");
  EXPECT_GT(got.stats.spec_accepted_tokens, 0);
}

// Stop conditions inside a run of accepted drafts: the tokens after the stop are dropped and
// the finish reason is the one plain decoding gives. The stop token / max_tokens are chosen in
// the middle of the looping part of the reference output, where drafts are accepted.
TEST(SpecDecode, StopTokensAndMaxTokensInsideAcceptedDrafts) {
  const auto prompts = repeating_prompts(6, 6);
  const SpecRun ref = generate(spec_base(), prompts, {greedy(tokens(48))});
  std::vector<SamplingParams> stop_params, len_params;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams s = greedy(tokens(48));
    s.stop_token_ids = {ref.outputs[i].token_ids[20]};
    stop_params.push_back(s);
    SamplingParams l = greedy(13 + int(i) * 5);
    len_params.push_back(l);
  }
  for (const auto* params : {&stop_params, &len_params}) {
    const SpecRun plain = generate(spec_base(), prompts, *params);
    const SpecRun got = generate(with_spec(spec_base(), 8), prompts, *params);
    expect_identical(plain, got, params == &stop_params ? "stop_token_ids" : "max_tokens");
  }
}

// Stop strings, text and structured outputs need the tokenizer make-model writes when the npm
// tokenizer package is installed.
bool have_tokenizer() { return std::filesystem::exists(random_tiny_model() + "/tokenizer.json"); }

TEST(SpecDecode, StopStringsAndGrammarAreIdentical) {
  if (!have_tokenizer()) GTEST_SKIP() << "the random model has no tokenizer.json (npm tokenizer package absent)";
  const auto prompts = repeating_prompts(6, 7);
  const SpecRun ref = generate(spec_base(), prompts, {greedy(tokens(40))});
  std::vector<SamplingParams> params;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams s = greedy(tokens(40));
    const std::string& t = ref.outputs[i].text;
    if (t.size() > 8) s.stop = {t.substr(t.size() / 2, 3)};
    params.push_back(s);
  }
  const SpecRun plain = generate(spec_base(), prompts, params);
  const SpecRun got = generate(with_spec(spec_base(), 6), prompts, params);
  expect_identical(plain, got, "stop strings");
  // stop_reason names the stop string that ended each output (vLLM's field; Anthropic's
  // stop_sequence).
  for (size_t i = 0; i < prompts.size(); ++i) {
    const RequestOutput& o = plain.outputs[i];
    if (params[i].stop.empty()) {
      EXPECT_EQ(o.stop_reason, "") << i;
      continue;
    }
    EXPECT_EQ(o.finish_reason, "stop") << i;
    EXPECT_EQ(o.stop_reason, params[i].stop[0]) << i;
  }

  // A grammar whose text repeats (drafts accepted: the grammar's masks after each draft let
  // them through) and sampled choices inside it (drafts rejected; the grammar state after a
  // rejected draft is never kept).
  std::vector<SamplingParams> gp;
  for (int i = 0; i < 6; ++i) {
    SamplingParams s;
    s.seed = 7 + uint64_t(i);
    s.temperature = i % 2 ? 0.f : 0.8f;
    s.max_tokens = tokens(60);
    s.structured_outputs.regex = "(abc|abd|xyz){4,30}";
    gp.push_back(s);
  }
  const SpecRun gplain = generate(spec_base(), prompts, gp);
  const SpecRun ggot = generate(with_spec(spec_base(), 6), prompts, gp);
  expect_identical(gplain, ggot, "regex grammar");
  EXPECT_GT(ggot.stats.spec_accepted_tokens, 0);
}

// Nothing to draft (random prompts, sampled at temperature 1: no repetition) is the plain
// engine: no verification when no n-gram matches; when one does and is rejected the output is
// still identical.
TEST(SpecDecode, NoDraftsIsPlainDecoding) {
  std::mt19937 rng(9);
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < 4; ++i) {
    std::vector<int> p;
    for (int j = 0; j < 20; ++j) p.push_back(std::uniform_int_distribution<int>(3, 150000)(rng));
    prompts.push_back(p);
  }
  SamplingParams sp;
  sp.seed = 3;
  sp.max_tokens = tokens(24);
  sp.ignore_eos = true;
  Config c = spec_base();
  c.ngram_min = 3;  // a 3-gram of random tokens never repeats
  const SpecRun ref = generate(spec_base(), prompts, {sp});
  const SpecRun got = generate(with_spec(c), prompts, {sp});
  expect_identical(ref, got, "no drafts");
}

// The adaptive controller (timed steps, K per sequence) changes which drafts are verified, never
// the outputs.
TEST(SpecDecode, AdaptiveKIsIdentical) {
  if (kSanitized) GTEST_SKIP() << "timing-driven; its paths are the fixed-K tests' (sanitizer build)";
  const auto prompts = repeating_prompts(4, 8);
  SamplingParams sp;
  sp.seed = 11;
  sp.temperature = 0.7f;
  sp.max_tokens = tokens(40);
  sp.ignore_eos = true;
  for (const char* policy : {"prefill-first", "mixed"}) {
    Config c = spec_base();
    c.policy = policy;
    const SamplingParams p = c.policy == "mixed" ? sp : greedy(tokens(40));
    const SpecRun ref = generate(c, prompts, {p});
    const SpecRun got = generate(with_spec(c, 6, /*fixed=*/false), prompts, {p});
    expect_identical(ref, got, std::string("adaptive, ") + policy);
  }
}

TEST(SpecDecode, BadOptionsNameTheOption) {
  auto expect_error = [](Config c, const std::string& needle) {
    try {
      LLM llm(c);
      ADD_FAILURE() << "accepted; expected an error naming " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Config c = with_spec(spec_base());
  c.num_speculative_tokens = 0;
  expect_error(c, "num_speculative_tokens");
  c = with_spec(spec_base());
  c.num_speculative_tokens = 17;
  expect_error(c, "num_speculative_tokens");
  c = with_spec(spec_base());
  c.ngram_min = 3;
  c.ngram_max = 2;
  expect_error(c, "ngram_min");
  c = with_spec(spec_base());
  c.speculative = "eagle";
  expect_error(c, "speculative");
  c = with_spec(spec_base());
  c.speculative_max_batch = -1;
  expect_error(c, "speculative_max_batch");
}
