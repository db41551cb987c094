// SamplingParams::thinking_budget on the random tiny Qwen3 (its real tokenizer has <think> and
// </think>): inside a think block opened by the prompt, token N+1 is </think> whatever the model
// prefers; the rest matches a run whose logits were never touched up to that point; a budget is
// counted across the output; speculative decoding gives the same tokens; and a model without the
// markers refuses the request with a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "engine/thinking_budget.h"
#include "nanovllm/llm.h"
#include "random_model.h"
#include "util/check.h"

using namespace nanovllm;

namespace {

constexpr int kOpen = 151667, kClose = 151668;  // Qwen3's <think>, </think>

Config config() {
  Config c;
  c.model = random_tiny_model();
  c.device = "cpu";
  c.num_threads = 2;
  c.max_model_len = 512;
  c.num_kvcache_blocks = 128;
  c.backend.adaptive_threads = false;
  return c;
}

bool have_tokenizer() { return std::filesystem::exists(random_tiny_model() + "/tokenizer.json"); }

std::vector<int> thinking_prompt() {  // ... <|im_start|>assistant\n<think>\n
  return {151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198, kOpen, 198};
}

SamplingParams params(int budget, int max_tokens, uint64_t seed) {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = seed;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  sp.skip_special_tokens = false;
  sp.thinking_budget = budget;
  return sp;
}

TEST(ThinkingBudget, StateMachine) {
  ThinkTokens t{kOpen, kClose};
  const std::vector<int> opened = {1, kOpen, 2};
  ThinkingBudget b(2, t, opened, 151936);
  EXPECT_TRUE(b.thinking());
  EXPECT_TRUE(b.allowed().empty());
  b.on_token(5);
  EXPECT_TRUE(b.allowed().empty());
  const std::vector<int> one = {6};
  EXPECT_FALSE(b.allowed_after(one).empty());  // the draft would spend the budget
  b.on_token(6);
  ASSERT_FALSE(b.allowed().empty());
  const auto mask = b.allowed();
  for (size_t w = 0; w < mask.size(); ++w)
    EXPECT_EQ(mask[w], w == size_t(kClose) / 32 ? 1u << (kClose % 32) : 0u) << w;
  b.on_token(kClose);
  EXPECT_FALSE(b.thinking());
  EXPECT_TRUE(b.allowed().empty());
  // A prompt whose last marker closes the block starts outside; a new <think> counts on.
  const std::vector<int> closed = {kOpen, 3, kClose};
  ThinkingBudget c(1, t, closed, 151936);
  EXPECT_FALSE(c.thinking());
  c.on_token(kOpen);
  c.on_token(9);
  EXPECT_FALSE(c.allowed().empty());
}

TEST(ThinkingBudget, ForcesTheCloseAfterNTokens) {
  if (!have_tokenizer()) GTEST_SKIP() << "the random model has no tokenizer.json (npm tokenizer package absent)";
  LLM llm(config());
  for (uint64_t seed : {1, 2, 3}) {
    const RequestOutput free = llm.generate({Prompt(thinking_prompt())}, {params(-1, 24, seed)})[0];
    for (int budget : {0, 3, 10}) {
      const RequestOutput b = llm.generate({Prompt(thinking_prompt())}, {params(budget, 24, seed)})[0];
      const auto& ids = b.token_ids;
      ASSERT_EQ(ids.size(), 24u);
      const auto first_close = std::find(free.token_ids.begin(), free.token_ids.end(), kClose) - free.token_ids.begin();
      if (first_close <= budget) {
        // The model closed it by itself within the budget: nothing was forced.
        EXPECT_EQ(ids, free.token_ids) << "seed " << seed << " budget " << budget;
        continue;
      }
      // The first `budget` tokens are the free run's (same seed, untouched logits), then </think>.
      EXPECT_TRUE(std::equal(ids.begin(), ids.begin() + budget, free.token_ids.begin())) << "seed " << seed;
      EXPECT_EQ(ids[size_t(budget)], kClose) << "seed " << seed << " budget " << budget;
      EXPECT_EQ(std::count(ids.begin(), ids.begin() + budget, kClose), 0);
    }
  }
}

TEST(ThinkingBudget, SpeculationGivesTheSameTokens) {
  if (!have_tokenizer()) GTEST_SKIP() << "the random model has no tokenizer.json (npm tokenizer package absent)";
  // A repetitive thinking prompt so that n-gram drafts exist; greedy so that drafts are accepted.
  std::vector<int> prompt = thinking_prompt();
  for (int r = 0; r < 6; ++r)
    for (int t : {500, 600, 700, 800}) prompt.push_back(t);
  SamplingParams sp = params(5, 30, 4);
  sp.temperature = 0;
  LLM plain(config());
  const RequestOutput a = plain.generate({Prompt(prompt)}, {sp})[0];
  Config sc = config();
  sc.speculative = "ngram";
  sc.num_speculative_tokens = 4;
  sc.speculative_fixed_k = true;
  LLM spec(sc);
  const RequestOutput b = spec.generate({Prompt(prompt)}, {sp})[0];
  EXPECT_EQ(a.token_ids, b.token_ids);
  const auto close = std::find(a.token_ids.begin(), a.token_ids.end(), kClose);
  ASSERT_NE(close, a.token_ids.end());
  EXPECT_LE(close - a.token_ids.begin(), 5);
}

TEST(ThinkingBudget, ModelWithoutMarkersRefuses) {
  const std::string data = std::string(NANOVLLM_SHARED_DATA) + "/models/stories260K-hf";
  if (!std::filesystem::exists(data + "/config.json")) GTEST_SKIP() << "shared data absent: " << data;
  Config c;
  c.model = data;
  c.device = "cpu";
  c.num_threads = 1;
  LLM llm(c);
  try {
    (void)llm.generate({Prompt(std::vector<int>{1, 2, 3})}, {params(4, 4, 1)});
    ADD_FAILURE() << "accepted a thinking budget on a model without <think>";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("thinking_budget needs a reasoning model"), std::string::npos) << e.what();
  }
}

}  // namespace
