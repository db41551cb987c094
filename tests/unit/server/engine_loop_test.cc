// EngineLoop with a real (random, tiny) model: continuous batching across submissions, aborts
// free KV blocks, the waiting-queue bound, per-request errors, stop() ending streams, and an
// engine failure (injected) ending every request and leaving the loop dead.
#include <gtest/gtest.h>

#include "server/engine_loop.h"
#include "tiny_llm.h"

namespace nanovllm::server {
namespace {

using namespace std::chrono_literals;

class EngineLoopTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { llm_ = &test_support::TinyLLM::get(); }

  static EngineRequest ids_request(std::vector<int> ids, int max_tokens) {
    EngineRequest r;
    r.prompt_ids = std::move(ids);
    r.params.temperature = 0.f;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    return r;
  }

  // Reads a channel to its end (bounded): all deltas, or the submission error.
  struct Result {
    std::vector<StreamDelta> deltas;
    std::optional<ApiError> error;
  };
  static Result drain(Channel& ch, std::chrono::seconds limit = 60s) {
    Result r;
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      Channel::Batch b = ch.wait(200ms);
      for (auto& d : b.deltas) r.deltas.push_back(std::move(d));
      if (b.error) r.error = b.error;
      if (b.done) return r;
    }
    ADD_FAILURE() << "channel did not finish in time";
    return r;
  }

  static EngineSnapshot wait_idle(EngineLoop& loop) {
    const auto deadline = Clock::now() + 30s;
    EngineSnapshot s = loop.snapshot();
    while (Clock::now() < deadline && (s.stats.num_running > 0 || s.stats.num_blocks_used > 0)) {
      std::this_thread::sleep_for(20ms);
      s = loop.snapshot();
    }
    return s;
  }

  static LLM* llm_;
};
LLM* EngineLoopTest::llm_ = nullptr;

TEST_F(EngineLoopTest, SubmissionsShareTheBatch) {
  ServerMetrics m;
  EngineLoop loop(*llm_, m, 0);
  loop.start();
  std::vector<std::shared_ptr<Channel>> chans;
  for (int i = 0; i < 6; ++i) chans.push_back(loop.submit(ids_request({10 + i, 20, 30, 40}, 8), Clock::now()));
  for (auto& ch : chans) {
    Result r = drain(*ch);
    ASSERT_FALSE(r.error) << r.error->what();
    ASSERT_FALSE(r.deltas.empty());
    size_t tokens = 0;
    for (auto& d : r.deltas) tokens += d.token_ids.size();
    EXPECT_EQ(tokens, 8u);
    EXPECT_TRUE(r.deltas.back().finished);
    EXPECT_EQ(r.deltas.back().finish_reason, "length");
    EXPECT_EQ(r.deltas.back().num_prompt_tokens, 4);
    EXPECT_EQ(r.deltas.back().num_generated_tokens, 8);
  }
  EngineSnapshot s = wait_idle(loop);
  EXPECT_GT(s.stats.max_batch_size, 1) << "requests submitted together did not share a step";
  EXPECT_EQ(s.stats.num_blocks_used, 0);
  EXPECT_GE(m.ttft.count(), 6u);
  EXPECT_GT(m.batch_size.count(), 0u);
  loop.stop();
}

// n > 1: one channel, deltas with indices, done after every completion's final delta; stop()
// ends each unfinished completion.
TEST_F(EngineLoopTest, CompletionsOfOneRequestShareAChannel) {
  ServerMetrics m;
  EngineLoop loop(*llm_, m, 0);
  loop.start();
  EngineRequest req = ids_request({11, 22, 33, 44, 55}, 6);
  req.params.n = 3;
  Result r = drain(*loop.submit(req, Clock::now()));
  ASSERT_FALSE(r.error);
  std::vector<int> tokens(3, 0), finals(3, 0);
  for (auto& d : r.deltas) {
    ASSERT_TRUE(d.index >= 0 && d.index < 3) << d.index;
    tokens[size_t(d.index)] += int(d.token_ids.size());
    finals[size_t(d.index)] += d.finished ? 1 : 0;
  }
  EXPECT_EQ(tokens, std::vector<int>(3, 6));
  EXPECT_EQ(finals, std::vector<int>(3, 1));
  EXPECT_EQ(wait_idle(loop).stats.num_blocks_used, 0);

  req.params.max_tokens = 400;
  auto ch = loop.submit(req, Clock::now());
  while (ch->wait(10ms).deltas.empty()) {
  }
  loop.stop();  // the three completions end with "abort"
  Result rest = drain(*ch, 10s);
  int aborts = 0;
  for (auto& d : rest.deltas) aborts += d.finished && d.finish_reason == "abort" ? 1 : 0;
  EXPECT_EQ(aborts, 3);
}

TEST_F(EngineLoopTest, AbortFreesBlocks) {
  ServerMetrics m;
  EngineLoop loop(*llm_, m, 0);
  loop.start();
  auto ch = loop.submit(ids_request({5, 6, 7}, 250), Clock::now());
  // Wait for the first token, then abort as a disconnecting client would.
  Channel::Batch first;
  for (int i = 0; i < 300 && first.deltas.empty() && !first.done; ++i) first = ch->wait(100ms);
  ASSERT_FALSE(first.deltas.empty());
  loop.abort(ch);
  Result r = drain(*ch);
  ASSERT_FALSE(r.deltas.empty());
  EXPECT_EQ(r.deltas.back().finish_reason, "abort");
  EXPECT_LT(r.deltas.back().num_generated_tokens, 250);
  EngineSnapshot s = wait_idle(loop);
  EXPECT_EQ(s.stats.num_running, 0);
  EXPECT_EQ(s.stats.num_blocks_used, 0);
  loop.stop();
}

TEST_F(EngineLoopTest, PerRequestErrors) {
  ServerMetrics m;
  EngineLoop loop(*llm_, m, 0);
  loop.start();
  // Longer than max_model_len (256): the engine reports a finished "error" output.
  std::vector<int> long_prompt(300, 42);
  Result r = drain(*loop.submit(ids_request(long_prompt, 4), Clock::now()));
  ASSERT_FALSE(r.error);
  ASSERT_EQ(r.deltas.size(), 1u);
  EXPECT_EQ(r.deltas[0].finish_reason, "error");
  EXPECT_FALSE(r.deltas[0].error.empty());
  // A token id outside the vocabulary: rejected at submission (400).
  Result bad = drain(*loop.submit(ids_request({1, 1 << 30}, 4), Clock::now()));
  ASSERT_TRUE(bad.error);
  EXPECT_EQ(bad.error->status, 400);
  EXPECT_EQ(std::string(bad.error->what()).find(".cc:"), std::string::npos) << bad.error->what();
  // The loop still serves.
  Result ok = drain(*loop.submit(ids_request({3, 4}, 2), Clock::now()));
  ASSERT_FALSE(ok.error);
  EXPECT_EQ(ok.deltas.back().finish_reason, "length");
  loop.stop();
}

TEST_F(EngineLoopTest, WaitingBoundAndShutdown) {
  ServerMetrics m;
  EngineLoop loop(*llm_, m, 2);  // not started: submissions stay queued
  auto a = loop.submit(ids_request({1, 2}, 2), Clock::now());
  auto b = loop.submit(ids_request({1, 2}, 2), Clock::now());
  try {
    loop.submit(ids_request({1, 2}, 2), Clock::now());
    ADD_FAILURE() << "third submission accepted with max_waiting 2";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 503);
  }
  loop.start();
  EXPECT_FALSE(drain(*a).error);
  EXPECT_FALSE(drain(*b).error);
  // stop() with a long request in flight: it ends with "abort"; later submissions get 503.
  auto c = loop.submit(ids_request({7, 8}, 250), Clock::now());
  Channel::Batch first;
  for (int i = 0; i < 300 && first.deltas.empty() && !first.done; ++i) first = c->wait(100ms);
  loop.stop();
  Result r = drain(*c);
  ASSERT_FALSE(r.deltas.empty());
  EXPECT_EQ(r.deltas.back().finish_reason, "abort");
  try {
    loop.submit(ids_request({1}, 1), Clock::now());
    ADD_FAILURE() << "submission accepted after stop()";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 503);
  }
}

// An exception from step() mid-generation: streams that have output end with a final "error"
// delta, requests without output fail with 500, and the loop refuses new work (503) for good.
TEST_F(EngineLoopTest, EngineFailureEndsEveryRequestAndKillsTheLoop) {
  ServerMetrics m;
  EngineLoop loop(*llm_, m, 0);
  loop.inject_fault_after_steps(5);
  loop.start();
  auto a = loop.submit(ids_request({11, 12, 13}, 200), Clock::now());
  auto b = loop.submit(ids_request({21, 22, 23}, 200), Clock::now());
  for (auto* ch : {&a, &b}) {
    Result r = drain(**ch);
    if (r.error) {
      EXPECT_EQ(r.error->status, 500);
      continue;
    }
    ASSERT_FALSE(r.deltas.empty());
    EXPECT_TRUE(r.deltas.back().finished);
    EXPECT_EQ(r.deltas.back().finish_reason, "error");
    EXPECT_NE(r.deltas.back().error.find("injected engine fault"), std::string::npos) << r.deltas.back().error;
    size_t tokens = 0;
    for (auto& d : r.deltas) tokens += d.token_ids.size();
    EXPECT_LT(tokens, 200u);
  }
  EXPECT_TRUE(loop.dead());
  try {
    loop.submit(ids_request({1, 2}, 2), Clock::now());
    ADD_FAILURE() << "submission accepted by a dead loop";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 503);
  }
  loop.stop();  // joins a dead loop without hanging
}

}  // namespace
}  // namespace nanovllm::server
