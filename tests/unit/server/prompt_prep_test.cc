// Prompt preparation (vLLM's length rules) and the PrepGate bounding concurrent preparations.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "server/prompt_prep.h"

namespace nanovllm::server {
namespace {

using namespace std::chrono_literals;

GenerationRequest ids(int n, int max_tokens, bool set = true) {
  GenerationRequest r;
  r.prompt = std::vector<int>(size_t(n), 7);
  r.params.max_tokens = max_tokens;
  r.max_tokens_set = set;
  return r;
}

ApiError error_of(const GenerationRequest& r, int max_model_len) {
  try {
    (void)prepare_prompt(r, nullptr, max_model_len);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError";
  return ApiError(0, "", "");
}

TEST(PreparePrompt, PromptPlusMaxTokensMustFitTheContext) {
  EXPECT_EQ(prepare_prompt(ids(511, 1), nullptr, 512).prompt_ids.size(), 511u);
  ApiError e = error_of(ids(511, 16), 512);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_STREQ(e.what(),
               "'max_tokens' or 'max_completion_tokens' is too large: 16. This model's maximum context length is "
               "512 tokens and your request has 511 input tokens (16 > 512 - 511).");
  EXPECT_EQ(error_of(ids(600, 1), 512).status, 400);
}

TEST(PreparePrompt, UnsetMaxTokensTakesTheRestOfTheContext) {
  EngineRequest r = prepare_prompt(ids(100, 1 << 30, false), nullptr, 512);
  EXPECT_EQ(r.params.max_tokens, 412);
  ApiError e = error_of(ids(512, 1 << 30, false), 512);
  EXPECT_EQ(e.status, 400);
  EXPECT_STREQ(e.what(),
               "This model's maximum context length is 512 tokens. However, your request has 512 input tokens. "
               "Please reduce the length of the input messages.");
}

TEST(PreparePrompt, EmptyPromptAndMissingTokenizer) {
  ApiError e = error_of(ids(0, 4), 512);
  EXPECT_EQ(e.status, 400);
  EXPECT_STREQ(e.what(), "The decoder prompt cannot be empty");
  GenerationRequest text;
  text.prompt = std::string("hello");
  EXPECT_EQ(error_of(text, 512).param, "prompt");  // text without a tokenizer: 400, not a crash
  GenerationRequest chat;
  chat.chat = true;
  EXPECT_EQ(error_of(chat, 512).param, "messages");
}

TEST(PrepGate, BoundsConcurrencyAndWaiters) {
  PrepGate gate(1, 1);
  const auto far = std::chrono::steady_clock::now() + 10s;
  PrepGate::Slot a = gate.acquire(far, nullptr);
  ASSERT_TRUE(a.held());
  // One waiter allowed; a second one is refused with 503 at once.
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    PrepGate::Slot b = gate.acquire(far, nullptr);
    got = b.held();
  });
  std::this_thread::sleep_for(150ms);
  try {
    (void)gate.acquire(far, nullptr);
    ADD_FAILURE() << "second waiter accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 503);
  }
  EXPECT_FALSE(got.load());
  { PrepGate::Slot release = std::move(a); }
  waiter.join();
  EXPECT_TRUE(got.load());
}

TEST(PrepGate, DeadlineAndCancellation) {
  PrepGate gate(1, 0);
  PrepGate::Slot a = gate.acquire(std::chrono::steady_clock::now() + 1s, nullptr);
  try {
    (void)gate.acquire(std::chrono::steady_clock::now() + 200ms, nullptr);
    ADD_FAILURE() << "no timeout";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 503);
  }
  PrepGate::Slot c = gate.acquire(std::chrono::steady_clock::now() + 10s, [] { return true; });
  EXPECT_FALSE(c.held());  // the client left: nothing acquired
}

}  // namespace
}  // namespace nanovllm::server
