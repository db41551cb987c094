// EngineLoop with a real (random, tiny) model: continuous batching across submissions, aborts
// free KV blocks, the waiting-queue bound, per-request errors, and stop() ending streams.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "testing/make_model.h"
#include "nanovllm/llm.h"
#include "server/engine_loop.h"

namespace nanovllm::server {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class EngineLoopTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("nv_server_test_" + std::to_string(::getpid())));
    MakeModelOptions o;
    o.preset = "tiny";
    o.dtype = DType::F32;
    o.out_dir = dir_->string();
    o.threads = 2;
    make_random_model(o);
    Config c;
    c.model = dir_->string();
    c.num_threads = 2;
    c.max_model_len = 256;
    c.device = "cpu";
    llm_ = new LLM(c);
  }
  static void TearDownTestSuite() {
    delete llm_;
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }

  static GenerationRequest ids_request(std::vector<int> ids, int max_tokens) {
    GenerationRequest r;
    r.prompt = std::move(ids);
    r.params.temperature = 0.f;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.max_tokens_set = true;
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

  static fs::path* dir_;
  static LLM* llm_;
};
fs::path* EngineLoopTest::dir_ = nullptr;
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

}  // namespace
}  // namespace nanovllm::server
