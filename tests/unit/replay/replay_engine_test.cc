// Record a run with --trace-requests (in-process: requests arriving between steps, seeded,
// unseeded and greedy, n = 2, one aborted mid-run), replay it in-process with step timing, and
// get the same outputs, the same step count and the same abort; under another max_num_seqs the
// outputs stay equal while the schedule changes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "../engine_e2e/random_model.h"
#include "nanovllm/llm.h"
#include "replay/replay_engine.h"
#include "trace/output_diff.h"
#include "trace/request_log.h"

using namespace nanovllm;

namespace {

std::string trace_file(const std::string& name) {
  return std::string(NANOVLLM_BINARY_DIR) + "/replay_engine_" + std::to_string(::getpid()) + "_" + name + ".json";
}

Config config(const std::string& trace, int max_num_seqs) {
  Config c;
  c.model = random_tiny_model();
  c.device = "cpu";
  c.num_threads = 1;
  c.kvcache_block_size = 16;
  c.num_kvcache_blocks = 12;  // small: preemption
  c.max_model_len = 256;
  c.max_num_seqs = max_num_seqs;
  c.trace_path = trace;
  c.trace_requests = true;
  return c;
}

SamplingParams params(float temperature, std::optional<uint64_t> seed, int max_tokens, int n = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.n = n;
  return p;
}

std::vector<int> prompt(int start, int len) {
  std::vector<int> ids;
  for (int i = 0; i < len; ++i) ids.push_back(start + i);
  return ids;
}

// The recorded run: arrivals in three waves between steps, one request aborted after step 6.
int64_t record(const std::string& path) {
  LLM llm(config(path, 4));
  auto add = [&](int start, int len, SamplingParams p) { return llm.add_request(Prompt(prompt(start, len)), p); };
  add(3, 40, params(0, std::nullopt, 20));
  add(50, 30, params(0.9f, 77, 16));
  add(90, 20, params(1.0f, std::nullopt, 12));  // unseeded: the record keeps the drawn seed
  for (int i = 0; i < 3; ++i) (void)llm.step();
  add(3, 40, params(0, std::nullopt, 10));  // a shared prefix
  const uint64_t doomed = add(120, 25, params(0.7f, 5, 40, 2));
  for (int i = 0; i < 3; ++i) (void)llm.step();
  llm.abort(doomed);
  add(200, 60, params(0, std::nullopt, 24));
  while (!llm.is_finished()) (void)llm.step();
  return llm.stats().steps;
}

trace::OutputComparison replay_and_compare(const std::string& recorded, const std::string& out, int max_num_seqs,
                                           replay::ReplayStats& st) {
  const trace::RequestLog log = trace::load_request_log(recorded, true);
  {
    LLM llm(config(out, max_num_seqs));
    st = replay::replay_in_process(llm, replay::plan_replay(log), {});
  }
  return trace::compare_outputs(log, trace::load_request_log(out, true));
}

}  // namespace

TEST(ReplayEngine, StepTimingReproducesOutputsStepsAndAborts) {
  const std::string a = trace_file("a"), b = trace_file("b"), c = trace_file("c");
  const int64_t steps = record(a);
  const trace::RequestLog log = trace::load_request_log(a, true);
  ASSERT_EQ(log.requests.size(), 6u);
  ASSERT_EQ(log.outputs.size(), 7u);  // n = 2 for one request
  replay::ReplayStats st;
  const trace::OutputComparison same = replay_and_compare(a, b, 4, st);
  EXPECT_EQ(st.steps, steps);
  EXPECT_EQ(st.aborted, 1);
  EXPECT_EQ(same.equal, 7) << trace::to_json(same).dump();
  EXPECT_EQ(same.different + same.not_compared + same.only_a + same.only_b, 0);

  const trace::OutputComparison other = replay_and_compare(a, c, 1, st);
  EXPECT_NE(st.steps, steps);
  // The aborted request's tokens depend on when it was aborted, which another schedule moves;
  // every request that finished is equal.
  EXPECT_EQ(other.different, 0) << trace::to_json(other).dump();
  EXPECT_GE(other.equal, 5);
  for (const std::string& f : {a, b, c}) std::filesystem::remove(f);
}
