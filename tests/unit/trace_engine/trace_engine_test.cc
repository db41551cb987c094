// Traces of real engine runs (random tiny Qwen3): the file validates as trace events, and its
// counts equal the engine's statistics and outputs on workloads with preemption (a small KV
// cache) and prefix-cache hits (shared prompt prefixes), under both scheduling policies. Also:
// aborted, rejected and unfinished requests close their spans; tracing changes no output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "../engine_e2e/random_model.h"
#include "nanovllm/llm.h"
#include "trace/trace_data.h"
#include "trace/trace_summary.h"
#include "trace_validator.h"
#include "util/check.h"

using namespace nanovllm;
using nlohmann::json;

namespace {

std::string trace_file(const std::string& name) {
  return std::string(NANOVLLM_BINARY_DIR) + "/trace_engine_" + std::to_string(::getpid()) + "_" +
         name + ".json";
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  std::ostringstream os;
  os << f.rdbuf();
  return json::parse(os.str());
}

Config small_cache_config(const std::string& policy) {
  Config c;
  c.model = random_tiny_model();
  c.device = "cpu";  // not "auto": a unit run on a GPU machine stays on the CPU (exact counts, timing)
  c.num_threads = 1;  // one thread: spinning pool threads stall on a loaded machine
  c.kvcache_block_size = 16;
  c.num_kvcache_blocks = 20;  // 320 token slots for 10 sequences of up to ~100 tokens: preemption
  c.max_model_len = 256;
  c.policy = policy;
  c.max_num_batched_tokens = policy == "mixed" ? 64 : 512;  // mixed: chunked prefills
  return c;
}

// 10 prompts, three shared 32-token prefixes (two full blocks each) plus unique tails.
std::vector<Prompt> shared_prefix_prompts() {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> tok(3, 500);
  std::vector<std::vector<int>> prefixes(3);
  for (auto& p : prefixes)
    for (int i = 0; i < 32; ++i) p.push_back(tok(rng));
  std::vector<Prompt> out;
  for (int i = 0; i < 10; ++i) {
    std::vector<int> ids = prefixes[size_t(i % 3)];
    const int tail = 5 + i * 3;
    for (int k = 0; k < tail; ++k) ids.push_back(tok(rng));
    out.emplace_back(ids);
  }
  return out;
}

SamplingParams greedy(int max_tokens) {
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  return sp;
}

struct RunResult {
  std::vector<RequestOutput> outputs;
  EngineStats stats;
};

RunResult run_workload(Config c) {
  LLM llm(c);
  RunResult r;
  std::vector<SamplingParams> params;
  for (int i = 0; i < 10; ++i) params.push_back(greedy(8 + 3 * i));
  r.outputs = llm.generate(shared_prefix_prompts(), params);
  r.stats = llm.stats();
  return r;  // the trace is closed when `llm` goes out of scope
}

void expect_valid(const json& events) {
  const auto errors = trace_test::validate_trace_events(events);
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_TRUE(errors.empty());
}

void check_counts_equal_stats(const std::string& policy) {
  SCOPED_TRACE("policy " + policy);
  Config c = small_cache_config(policy);
  c.trace_path = trace_file(policy);
  const RunResult run = run_workload(c);
  const EngineStats& st = run.stats;
  // The workload must exercise what is being checked.
  ASSERT_GT(st.preemptions, 0) << "no preemption: the KV cache is too large for this test";
  ASSERT_GT(st.prefix_cache_hit_tokens, 0) << "no prefix-cache hit";

  const json ev = read_json(c.trace_path);
  expect_valid(ev);

  int64_t steps = 0, prefill = 0, decode = 0, seq_tokens = 0, preempted = 0, preempted_spans = 0;
  int64_t mixed_steps = 0, unsampled_chunks = 0;
  std::map<uint64_t, int64_t> sampled;  // request id -> tokens sampled for it
  json last_prefix, last_preemptions, final_stats;
  std::map<uint64_t, json> request_end;
  for (const json& e : ev) {
    const std::string ph = e["ph"], name = e["name"], cat = e.value("cat", "");
    if (ph == "X" && cat == "step") {
      steps++;
      prefill += e["args"]["prefill_tokens"].get<int64_t>();
      decode += e["args"]["decode_tokens"].get<int64_t>();
      preempted += e["args"]["num_preempted"].get<int64_t>();
      if (name == "mixed") mixed_steps++;
      for (const json& s : e["args"]["seqs"]) {
        seq_tokens += s["tokens"].get<int64_t>();
        if (s.value("sample", true))
          sampled[s["seq"].get<uint64_t>()]++;
        else
          unsampled_chunks++;
      }
    }
    if (ph == "b" && name == "preempted") preempted_spans++;
    if (ph == "C" && name == "prefix_cache_tokens") last_prefix = e["args"];
    if (ph == "C" && name == "preemptions") last_preemptions = e["args"];
    if (ph == "e" && name.rfind("request ", 0) == 0)
      request_end[e["id"].get<uint64_t>()] = e["args"];
    if (ph == "i" && name == "engine_stats") final_stats = e["args"]["stats"];
  }
  EXPECT_EQ(steps, st.steps);
  EXPECT_EQ(prefill, st.prefill_tokens);
  EXPECT_EQ(decode, st.decode_tokens);
  EXPECT_EQ(seq_tokens, st.prefill_tokens + st.decode_tokens);
  EXPECT_EQ(preempted, st.preemptions);
  EXPECT_EQ(preempted_spans, st.preemptions);
  EXPECT_EQ(last_preemptions["total"].get<int64_t>(), st.preemptions);
  EXPECT_EQ(last_prefix["hit"].get<int64_t>(), st.prefix_cache_hit_tokens);
  EXPECT_EQ(last_prefix["query"].get<int64_t>(), st.prefix_cache_query_tokens);
  EXPECT_EQ(final_stats["steps"].get<int64_t>(), st.steps);
  if (policy == "mixed") {
    EXPECT_GT(mixed_steps, 0);
    EXPECT_GT(unsampled_chunks, 0) << "no chunked prefill";
  }
  ASSERT_EQ(request_end.size(), run.outputs.size());
  for (const RequestOutput& o : run.outputs) {
    SCOPED_TRACE("request " + std::to_string(o.request_id));
    EXPECT_EQ(sampled[o.request_id], int64_t(o.token_ids.size()));
    const json& a = request_end[o.request_id];
    EXPECT_EQ(a["output_tokens"].get<int64_t>(), int64_t(o.token_ids.size()));
    EXPECT_EQ(a["prompt_tokens"].get<int64_t>(), int64_t(o.prompt_token_ids.size()));
    EXPECT_EQ(a["cached_tokens"].get<int>(), o.num_cached_tokens);
    EXPECT_EQ(a["finish_reason"], o.finish_reason);
  }

  // trace-view's reading: same counts, and its TTFT (recomputed from the step events) equals the
  // tracer's own per-request figure.
  const trace::TraceData d = trace::load_trace(c.trace_path);
  const trace::TraceSummary s = trace::summarize(d);
  EXPECT_FALSE(d.truncated);
  EXPECT_EQ(s.steps, st.steps);
  EXPECT_EQ(s.preemptions, st.preemptions);
  EXPECT_EQ(s.prefix_hit_tokens, st.prefix_cache_hit_tokens);
  int64_t outputs = 0;
  for (const auto& o : run.outputs) outputs += int64_t(o.token_ids.size());
  EXPECT_EQ(s.output_tokens, outputs);
  EXPECT_EQ(s.requests, int64_t(run.outputs.size()));
  for (const trace::RequestRecord& r : d.requests) {
    ASSERT_FALSE(r.token_times.empty());
    EXPECT_NEAR((r.token_times.front() - r.arrival) / 1e3, r.end_args["ttft_ms"].get<double>(),
                0.002);
  }
  std::remove(c.trace_path.c_str());
}

}  // namespace

TEST(TraceEngine, CountsEqualStatsPrefillFirst) { check_counts_equal_stats("prefill-first"); }
TEST(TraceEngine, CountsEqualStatsMixed) { check_counts_equal_stats("mixed"); }

TEST(TraceEngine, TracingChangesNoOutput) {
  Config off = small_cache_config("prefill-first"), on = off;
  on.trace_path = trace_file("same");
  const RunResult a = run_workload(off), b = run_workload(on);
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i)
    EXPECT_EQ(a.outputs[i].token_ids, b.outputs[i].token_ids);
  EXPECT_EQ(a.stats.steps, b.stats.steps);
  EXPECT_EQ(a.stats.preemptions, b.stats.preemptions);
  std::remove(on.trace_path.c_str());
}

TEST(TraceEngine, AbortedRejectedAndUnfinishedRequestsCloseTheirSpans) {
  Config c = small_cache_config("prefill-first");
  c.trace_path = trace_file("abort");
  {
    LLM llm(c);
    const auto prompts = shared_prefix_prompts();
    std::vector<uint64_t> ids;
    for (int i = 0; i < 4; ++i) ids.push_back(llm.add_request(prompts[size_t(i)], greedy(30)));
    const uint64_t too_long =
        llm.add_request(Prompt(std::vector<int>(300, 5)), greedy(4));  // > max_model_len
    llm.step();
    llm.step();
    llm.abort(ids[0]);  // running
    llm.abort(ids[3]);  // running or waiting
    for (int i = 0; i < 3; ++i) llm.step();
    (void)too_long;
    // Destroyed with requests 1 and 2 still running: their spans end "unfinished".
  }
  const json ev = read_json(c.trace_path);
  expect_valid(ev);
  std::map<uint64_t, std::string> reasons;
  for (const json& e : ev)
    if (e["ph"] == "e" && e["name"].get<std::string>().rfind("request ", 0) == 0)
      reasons[e["id"].get<uint64_t>()] = e["args"]["finish_reason"];
  EXPECT_EQ(reasons[0], "abort");
  EXPECT_EQ(reasons[3], "abort");
  EXPECT_EQ(reasons[4], "error");
  EXPECT_EQ(reasons[1], "unfinished");
  EXPECT_EQ(reasons[2], "unfinished");
  EXPECT_EQ(reasons.size(), 5u);
  std::remove(c.trace_path.c_str());
}

TEST(TraceEngine, UnwritableTracePathIsAClearError) {
  Config c = small_cache_config("prefill-first");
  c.trace_path = "/nonexistent-dir/trace.json";
  try {
    LLM llm(c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open trace file '/nonexistent-dir/trace.json'"),
              std::string::npos)
        << e.what();
  }
}
