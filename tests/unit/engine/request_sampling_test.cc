// RequestSampling: the sampling row an engine request produces each step.
#include <gtest/gtest.h>

#include <map>

#include "engine/request_sampling.h"

namespace nanovllm {
namespace {

TEST(RequestSampling, RowCarriesParamsSeedAndStep) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 5;
  p.top_p = 0.9f;
  p.min_p = 0.1f;
  p.logprobs = 3;
  p.logit_bias = {{9, -1.f}, {2, 4.f}};
  const std::vector<int> prompt = {1, 2}, eos = {0};
  RequestSampling rs(p, 1234, prompt, eos);
  const SamplingRow r = rs.row(6);
  EXPECT_EQ(r.temperature, 0.7f);
  EXPECT_EQ(r.top_k, 5);
  EXPECT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.min_p, 0.1f);
  EXPECT_EQ(r.seed, 1234u);
  EXPECT_EQ(r.step, 6u);
  EXPECT_EQ(r.num_logprobs, 3);
  ASSERT_EQ(r.logit_bias.size(), 2u);  // ascending, as the op requires
  EXPECT_EQ(r.logit_bias[0].token, 2);
  EXPECT_EQ(r.logit_bias[0].bias, 4.f);
  EXPECT_EQ(r.logit_bias[1].token, 9);
  EXPECT_TRUE(r.history.empty());  // no penalty: no history kept
  EXPECT_TRUE(r.suppress.empty());
  EXPECT_TRUE(r.allowed.empty());
}

TEST(RequestSampling, SuppressesEosAndStopIdsUntilMinTokens) {
  SamplingParams p;
  p.min_tokens = 2;
  p.stop_token_ids = {7, 8};
  const std::vector<int> prompt = {1}, eos = {0, 3};
  RequestSampling rs(p, 1, prompt, eos);
  for (int n : {0, 1}) {
    const SamplingRow r = rs.row(n);
    EXPECT_EQ(std::vector<int32_t>(r.suppress.begin(), r.suppress.end()),
              (std::vector<int32_t>{0, 3, 7, 8}));
  }
  EXPECT_TRUE(rs.row(2).suppress.empty());
}

TEST(RequestSampling, HistoryCountsGeneratedTokensSortedAndUnique) {
  SamplingParams p;
  p.repetition_penalty = 1.2f;
  const std::vector<int> prompt = {5, 3, 5, 9}, eos = {0};
  RequestSampling rs(p, 1, prompt, eos);
  const std::vector<int> generated = {9, 4, 4, 4, 11, 3};
  std::map<int, int> expect = {{3, 0}, {5, 0}, {9, 0}};
  for (int t : generated) {
    rs.on_token(t);
    expect[t]++;
    const SamplingRow r = rs.row(0);
    ASSERT_EQ(r.history.size(), expect.size());
    size_t j = 0;
    for (const auto& [tok, n] : expect) {
      EXPECT_EQ(r.history[j].token, tok);
      EXPECT_EQ(r.history[j].count, n) << "token " << tok;
      ++j;
    }
  }
  EXPECT_EQ(rs.row(0).penalties.repetition, 1.2f);
}

}  // namespace
}  // namespace nanovllm
