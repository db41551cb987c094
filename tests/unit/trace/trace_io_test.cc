// The trace file machinery without an engine: JSON streaming, the incremental writer (bounded
// buffer, valid file at close, write errors), reading back (repair of a cut-short file, clear
// errors), percentiles against hand-computed values, and page size bounds on large traces.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "trace/json_stream.h"
#include "trace/svg_plot.h"
#include "trace/trace_data.h"
#include "trace/trace_page.h"
#include "trace/trace_summary.h"
#include "trace/trace_writer.h"
#include "util/check.h"

using namespace nanovllm;
using namespace nanovllm::trace;
using nlohmann::json;

namespace {

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("nanovllm_trace_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

}  // namespace

TEST(JsonStream, CommasNestingAndEscapes) {
  std::string out;
  JsonStream js(out);
  js.begin_object().field("a", 1).field("s", std::string_view("q\"\\\n\x01 é"));
  js.key("arr")
      .begin_array()
      .value(int64_t(-3))
      .value(2.5, 2)
      .begin_object()
      .end_object()
      .null()
      .end_array();
  js.field("t", true).field("nan", std::nan(""), 3).key("raw").raw("{\"x\":[1,2]}").end_object();
  ASSERT_TRUE(js.balanced());
  const json j = json::parse(out);  // an independent parser accepts it
  EXPECT_EQ(j["a"], 1);
  EXPECT_EQ(j["s"], "q\"\\\n\x01 é");
  EXPECT_EQ(j["arr"], json::parse(R"([-3, 2.5, {}, null])"));
  EXPECT_EQ(j["t"], true);
  EXPECT_TRUE(j["nan"].is_null());
  EXPECT_EQ(j["raw"]["x"][1], 2);
  EXPECT_THROW(js.end_object(), Error);  // unbalanced close is caught
}

TEST(TraceWriter, IncrementalFlushAndValidFileAtClose) {
  const std::string p = tmp_path("writer.json");
  {
    TraceWriter w(p, /*flush_bytes=*/256);
    for (int i = 0; i < 100; ++i) {
      w.begin_event('X', "ev", "cat", 1, 10.0 * i)
          .field("dur", 5.0, 3)
          .key("args")
          .begin_object()
          .field("i", i)
          .end_object();
      w.end_event();
    }
    // Flushed in pieces: most of the events are on disk before close, and what is there parses
    // once the array is closed (each event is a whole line).
    const std::string partial = slurp(p);
    EXPECT_GT(partial.size(), 256u * 10);
    json j = json::parse(partial + "\n]", nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << partial.substr(partial.size() - 200);
    EXPECT_GT(j.size(), 50u);
    w.close();
    w.close();  // idempotent
  }
  const json j = json::parse(slurp(p));
  ASSERT_EQ(j.size(), 100u);
  EXPECT_EQ(j[42]["args"]["i"], 42);
  EXPECT_EQ(j[42]["ph"], "X");
  EXPECT_EQ(j[42]["pid"], 1);
  std::remove(p.c_str());
}

TEST(TraceWriter, BadPathIsAClearErrorAndDiskFullStopsTracing) {
  try {
    TraceWriter w("/nonexistent-dir/x/trace.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x/trace.json"), std::string::npos)
        << e.what();
  }
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full to simulate a full disk";
  TraceWriter w("/dev/full", 64);
  for (int i = 0; i < 10; ++i) {  // must not throw: the engine keeps serving
    w.begin_event('i', "x", "c", 1, i).field("s", "g");
    w.end_event();
  }
  EXPECT_FALSE(w.ok());
}

TEST(TraceData, RepairsACutShortFileAndRejectsOtherFiles) {
  const std::string text =
      "[\n{\"name\":\"engine_config\",\"cat\":\"engine\",\"ph\":\"i\",\"ts\":0,\"pid\":1,\"tid\":1,"
      "\"args\":"
      "{\"num_kvcache_blocks\":8}},\n"
      "{\"name\":\"decode\",\"cat\":\"step\",\"ph\":\"X\",\"ts\":10,\"pid\":1,\"tid\":1,\"dur\":5,"
      "\"args\":"
      "{\"num_seqs\":1,\"decode_tokens\":1,\"seqs\":[{\"seq\":3,\"tokens\":1}]}},\n"
      "{\"name\":\"decode\",\"cat\":\"step\",\"ph\":\"X\",\"ts\":20,\"pid\":1,\"tid\":1,\"du";
  const TraceData d = parse_trace(text);
  EXPECT_TRUE(d.truncated);
  ASSERT_EQ(d.steps.size(), 1u);
  ASSERT_EQ(d.requests.size(), 1u);
  EXPECT_EQ(d.requests[0].id, 3u);
  EXPECT_EQ(d.requests[0].token_times, std::vector<double>{15.0});
  EXPECT_EQ(d.config["num_kvcache_blocks"], 8);
  EXPECT_THROW(parse_trace("not json at all"), Error);
  EXPECT_THROW(parse_trace("[{\"name\":\"x\",\"ph\":\"X\",\"ts\":1,\"pid\":1,\"tid\":1}]"),
               Error);  // no nanovllm events
  EXPECT_THROW(parse_trace("{\"a\":1}"), Error);
  EXPECT_THROW(load_trace("/nonexistent-dir/trace.json"), Error);
}

TEST(TraceSummary, PercentilesMatchHandComputedValues) {
  // numpy.percentile's default (linear): [1, 2, 3, 4] -> p50 2.5, p90 3.7; one value -> itself.
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_NEAR(percentile({4, 1, 3, 2}, 90), 3.7, 1e-12);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 0), 1);
  EXPECT_TRUE(std::isnan(percentile({}, 50)));
  const Distribution d = Distribution::of({10, 20, 30});
  EXPECT_EQ(d.count, 3);
  EXPECT_DOUBLE_EQ(d.mean, 20);
  EXPECT_DOUBLE_EQ(d.max, 30);
  EXPECT_DOUBLE_EQ(d.p90, 28);
}

TEST(SvgPlot, ColumnMaxKeepsSpikesAndIsBounded) {
  TimeScale sc{0, 1000, 0, 100};
  ColumnMax cols(sc, 10);  // 100 us per column
  for (int i = 0; i < 1000; ++i) cols.add(i, i + 1, 1.0);
  cols.add(505, 506, 42.0);  // one short spike
  EXPECT_EQ(cols.columns(), 10);
  EXPECT_DOUBLE_EQ(cols.value(5), 42.0);
  EXPECT_DOUBLE_EQ(cols.value(4), 1.0);
  EXPECT_DOUBLE_EQ(cols.max(), 42.0);
  ColumnMax empty(sc, 10);
  empty.add(0, 99, 3.0);  // [0, 99) stays in column 0
  EXPECT_DOUBLE_EQ(empty.value(0), 3.0);
  EXPECT_TRUE(std::isnan(empty.value(1)));
}

TEST(TracePage, LargeTraceRendersWithBoundedSize) {
  // 20000 steps and 5000 requests, built directly: the page stays small and says what it shows.
  TraceData d;
  d.config = {{"num_kvcache_blocks", 1024}, {"model", "<m&>"}};
  for (int i = 0; i < 20000; ++i) {
    StepRecord s;
    s.ts = i * 1000.0;
    s.dur = 900;
    s.phase = i % 50 == 0 ? "prefill" : "decode";
    s.num_seqs = 1 + i % 256;
    s.prefill_tokens = i % 50 == 0 ? 4096 : 0;
    s.decode_tokens = i % 50 == 0 ? 0 : s.num_seqs;
    d.steps.push_back(s);
    d.kv.push_back({s.end(), i % 1024, 1024 - i % 1024, 100});
    d.queues.push_back({s.end(), i % 30, s.num_seqs});
  }
  for (int r = 0; r < 5000; ++r) {
    RequestRecord q;
    q.id = uint64_t(r);
    q.arrival = r * 3000.0;
    q.end = q.arrival + 50000;
    q.finish_reason = "length";
    q.spans = {{"queued", q.arrival, q.arrival + 1000},
               {"prefill", q.arrival + 1000, q.arrival + 2000},
               {"decode", q.arrival + 2000, q.end}};
    q.token_times = {q.arrival + 2000, q.arrival + 3000};
    d.requests.push_back(q);
  }
  d.t_begin = 0;
  d.t_end = 20000 * 1000.0;
  PageOptions opt;
  const std::string page = render_page(d, summarize(d), opt);
  EXPECT_LT(page.size(), 2u << 20) << "page not downsampled";
  EXPECT_NE(page.find("data-chart=\"steps\""), std::string::npos);
  EXPECT_NE(page.find("data-chart=\"kv\""), std::string::npos);
  EXPECT_NE(page.find("data-chart=\"requests\""), std::string::npos);
  EXPECT_NE(page.find("showing 200 of 5000 requests"), std::string::npos);
  EXPECT_NE(page.find("&lt;m&amp;&gt;"), std::string::npos);  // model name escaped
  EXPECT_EQ(page.find("<m&>"), std::string::npos);
  // Nothing is fetched: the only URL is the SVG namespace name.
  std::string rest = page;
  for (size_t p; (p = rest.find("http://www.w3.org/2000/svg")) != std::string::npos;)
    rest.erase(p, 26);
  EXPECT_EQ(rest.find("http"), std::string::npos);
  EXPECT_EQ(rest.find("src="), std::string::npos);
}
