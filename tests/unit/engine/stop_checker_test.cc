// StopChecker: the one decision of why a completion finishes after a sampled token.
#include <gtest/gtest.h>

#include <memory>

#include "engine/request.h"
#include "engine/stop_checker.h"

namespace nanovllm {
namespace {

struct Fixture {
  explicit Fixture(const SamplingParams& p) : request(1, p, false, nullptr) {
    request.completions.push_back(
        std::make_unique<Completion>(request, 0, 1, std::vector<int>{10, 11, 12}, 0, 16, eos, nullptr));
  }
  // Appends `token` (as the scheduler's postprocess does) and asks the checker.
  FinishReason feed(const StopChecker& sc, int token) {
    Completion& c = *request.completions[0];
    c.seq.append_token(token);
    return sc.check(c, token, nullptr);
  }
  std::vector<int> eos{2};
  Request request;
};

TEST(StopChecker, EosStopIdsMinTokensAndLength) {
  const StopChecker sc({2}, /*max_seq_len=*/100);
  SamplingParams p;
  p.max_tokens = 4;
  Fixture a(p);
  EXPECT_EQ(a.feed(sc, 5), FinishReason::kNone);
  EXPECT_EQ(a.feed(sc, 2), FinishReason::kStop);  // EOS
  p.min_tokens = 2;
  Fixture b(p);
  EXPECT_EQ(b.feed(sc, 2), FinishReason::kNone);  // EOS before min_tokens: goes on
  EXPECT_EQ(b.feed(sc, 2), FinishReason::kStop);
  p.min_tokens = 0;
  p.ignore_eos = true;
  p.stop_token_ids = {9};
  Fixture c(p);
  EXPECT_EQ(c.feed(sc, 2), FinishReason::kNone);  // ignore_eos
  EXPECT_EQ(c.feed(sc, 9), FinishReason::kStop);  // a stop id also with ignore_eos (vLLM)
  Fixture d(p);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(d.feed(sc, 5), FinishReason::kNone);
  EXPECT_EQ(d.feed(sc, 5), FinishReason::kLength);  // max_tokens
  // The cache-derived length bound: prompt 3 + 2 tokens = max_seq_len 5.
  const StopChecker tight({2}, 5);
  Fixture e(p);
  EXPECT_EQ(e.feed(tight, 5), FinishReason::kNone);
  EXPECT_EQ(e.feed(tight, 5), FinishReason::kLength);
}

TEST(StopChecker, EosOnTheLastAllowedTokenIsStopNotLength) {
  const StopChecker sc({2}, 100);
  SamplingParams p;
  p.max_tokens = 1;
  Fixture a(p);
  EXPECT_EQ(a.feed(sc, 2), FinishReason::kStop);
  Fixture b(p);
  EXPECT_EQ(b.feed(sc, 3), FinishReason::kLength);
}

}  // namespace
}  // namespace nanovllm
