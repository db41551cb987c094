// Request records (--trace-requests) read back, output comparison between two runs, and the
// compare page, without an engine: hand-written events in the schema of src/trace/README.md.
#include <gtest/gtest.h>

#include <string>

#include "trace/compare_page.h"
#include "trace/output_diff.h"
#include "trace/request_log.h"
#include "trace/trace_compare.h"
#include "trace/trace_data.h"
#include "util/check.h"

using namespace nanovllm;
using namespace nanovllm::trace;
using nlohmann::json;

namespace {

json record(uint64_t id, double ts, int64_t step, std::vector<int> prompt, double temperature,
            uint64_t seed, bool seed_given = true) {
  return {{"name", "request_record"}, {"cat", "replay"}, {"ph", "i"}, {"ts", ts}, {"pid", 1}, {"tid", 3},
          {"args",
           {{"format", 1}, {"request_id", id}, {"step", step}, {"route", "/v1/completions"},
            {"prompt_token_ids", prompt},
            {"params", {{"temperature", temperature}, {"max_tokens", 4}, {"seed", seed}}},
            {"seed_given", seed_given}, {"body", "{\"prompt\": [1]}"}}}};
}

json output(uint64_t id, int index, std::vector<int> tokens, const char* reason = "length") {
  return {{"name", "request_output"}, {"cat", "replay"}, {"ph", "i"}, {"ts", 100.0}, {"pid", 1}, {"tid", 3},
          {"args", {{"request_id", id}, {"index", index}, {"step", 3}, {"finish_reason", reason},
                    {"token_ids", tokens}, {"text", "t" + std::to_string(tokens.size())}}}};
}

json config_event(int max_num_seqs) {
  return {{"name", "engine_config"}, {"cat", "engine"}, {"ph", "i"}, {"ts", 0}, {"pid", 1}, {"tid", 1},
          {"args", {{"model", "m"}, {"max_num_seqs", max_num_seqs}, {"num_kvcache_blocks", 8}}}};
}

json step(double ts, std::vector<uint64_t> seqs) {
  json s = json::array();
  for (uint64_t q : seqs) s.push_back({{"seq", q}, {"tokens", 1}});
  return {{"name", "decode"}, {"cat", "step"}, {"ph", "X"}, {"ts", ts}, {"dur", 10.0}, {"pid", 1}, {"tid", 1},
          {"args", {{"step", 0}, {"num_seqs", seqs.size()}, {"decode_tokens", seqs.size()}, {"seqs", s}}}};
}

}  // namespace

TEST(RequestLog, ReadsRecordsAndOutputsAndSaysWhatIsMissing) {
  const json events = json::array({config_event(4), record(1, 20, 2, {5, 6}, 0.5, 9), record(0, 10, 0, {1, 2, 3}, 0, 7),
                                    output(0, 0, {4, 4}), step(30, {0, 1})});
  const RequestLog log = request_log_from_events(events, false);
  ASSERT_EQ(log.requests.size(), 2u);
  EXPECT_EQ(log.requests[0].id, 0u);  // by id = arrival order
  EXPECT_EQ(log.requests[0].prompt_token_ids, (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(log.requests[0].greedy());
  EXPECT_FALSE(log.requests[1].greedy());
  EXPECT_EQ(log.requests[1].seed(), 9u);
  EXPECT_EQ(log.requests[1].step, 2);
  EXPECT_EQ(log.requests[0].route, "/v1/completions");
  EXPECT_EQ(log.steps, 1);
  EXPECT_EQ(log.config.value("max_num_seqs", 0), 4);
  ASSERT_EQ(log.outputs_of(0).size(), 1u);
  EXPECT_TRUE(log.outputs_of(1).empty());

  json newer = record(0, 0, 0, {1}, 0, 0);
  newer["args"]["format"] = 99;
  try {
    request_log_from_events(json::array({newer}), false);
    FAIL() << "a newer format must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("format 99"), std::string::npos) << e.what();
  }
  json no_prompt = record(0, 0, 0, {1}, 0, 0);
  no_prompt["args"].erase("prompt_token_ids");
  EXPECT_THROW(request_log_from_events(json::array({no_prompt}), false), Error);
}

TEST(RequestLog, TruncatedFileLoadsUpToTheLastCompleteEvent) {
  std::string text = "[\n" + config_event(4).dump() + ",\n" + record(0, 1, 0, {1}, 0, 0).dump() + ",\n" +
                     record(1, 2, 0, {2}, 0, 0).dump();
  text.resize(text.size() - 20);  // a killed server: the last line cut in the middle
  bool truncated = false;
  const json events = parse_trace_events(text, truncated);
  EXPECT_TRUE(truncated);
  const RequestLog log = request_log_from_events(events, truncated);
  EXPECT_EQ(log.requests.size(), 1u);
}

TEST(OutputDiff, MatchesByContentAndComparesWhatIsReproducible) {
  // A: 0 greedy, 1 seeded, 2 unseeded (drawn seed 5), 3 greedy (unfinished in A).
  const json a = json::array({record(0, 0, 0, {1, 2}, 0, 1), record(1, 1, 0, {3}, 1.0, 42),
                              record(2, 2, 0, {4}, 1.0, 5, false), record(3, 3, 0, {6}, 0, 0),
                              output(0, 0, {7, 8, 9}), output(1, 0, {1, 1}), output(2, 0, {2})});
  // B: the same requests in another order (other ids); 1's tokens differ; 2 drew seed 6.
  const json b = json::array({record(10, 0, 0, {3}, 1.0, 42), record(11, 0, 0, {1, 2}, 0, 77),
                              record(12, 0, 0, {4}, 1.0, 6, false), record(13, 0, 0, {6}, 0, 0),
                              record(14, 0, 0, {9, 9}, 0, 0), output(10, 0, {1, 2}), output(11, 0, {7, 8, 9}),
                              output(12, 0, {3}), output(13, 0, {5})});
  const OutputComparison c =
      compare_outputs(request_log_from_events(a, false), request_log_from_events(b, false));
  ASSERT_TRUE(c.available);
  EXPECT_EQ(c.equal, 1);         // request 0 (greedy: seeds do not matter)
  EXPECT_EQ(c.different, 1);     // request 1
  EXPECT_EQ(c.not_compared, 2);  // request 2 (other seed), request 3 (no output in A)
  EXPECT_EQ(c.only_b, 1);        // request 14
  ASSERT_EQ(c.pairs.size(), 5u);
  EXPECT_EQ(c.pairs[0].b_id, 11u);
  EXPECT_EQ(c.pairs[1].status, OutputStatus::kDifferent);
  EXPECT_EQ(c.pairs[1].first_difference, 1);
  const json j = to_json(c);
  EXPECT_EQ(j["not_equal"].size(), 4u);
  EXPECT_FALSE(compare_outputs(RequestLog{}, request_log_from_events(b, false)).available);
}

TEST(ComparePage, SelfContainedWithEveryChartAndTheDifferences) {
  Comparison c;
  const json a = json::array({config_event(4), record(0, 0, 0, {1}, 0, 0), step(10, {0}), step(30, {0}),
                              output(0, 0, {4, 5})});
  const json b = json::array({config_event(1), record(0, 0, 0, {1}, 0, 0), step(10, {0}), step(50, {0}),
                              output(0, 0, {4, 6})});
  for (auto [run, ev, name] : {std::tuple{&c.a, &a, "a.json"}, std::tuple{&c.b, &b, "b.json"}}) {
    run->source = name;
    run->data = trace_from_events(*ev, false);
    run->log = request_log_from_events(*ev, false);
    run->summary = summarize(run->data);
  }
  c.outputs = compare_outputs(c.a.log, c.b.log);
  const std::string page = render_compare_page(c, {});
  for (const char* chart : {"throughput", "queues", "kv", "ttft_cdf", "itl_cdf", "e2e_cdf"})
    EXPECT_NE(page.find(std::string("data-chart=\"") + chart + "\""), std::string::npos) << chart;
  EXPECT_NE(page.find("tokens differ from position 1"), std::string::npos);
  EXPECT_NE(page.find("class=\"diff\""), std::string::npos);  // max_num_seqs 4 vs 1 is marked
  std::string no_ns = page;  // the SVG namespace name is no address anything is fetched from
  for (size_t at; (at = no_ns.find("xmlns=\"http://www.w3.org/2000/svg\"")) != std::string::npos;)
    no_ns.erase(at, 34);
  EXPECT_EQ(no_ns.find("http://"), std::string::npos);
  EXPECT_EQ(no_ns.find("https://"), std::string::npos);
  EXPECT_EQ(to_json(c)["outputs"]["different"], 1);
}
