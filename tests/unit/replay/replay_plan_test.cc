// `nanovllm replay`'s pieces that need no engine or network: the plan from a request log, the
// bodies --url sends, the target URL's rules, and reading responses of every generation route.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "replay/http_response.h"
#include "replay/replay_plan.h"
#include "replay/target_url.h"
#include "trace/request_log.h"
#include "util/check.h"

using namespace nanovllm;
using namespace nanovllm::replay;
using nlohmann::json;

namespace {

trace::RequestLog log_of(std::vector<trace::RecordedRequest> reqs, std::vector<trace::RecordedOutput> outs = {}) {
  trace::RequestLog log;
  log.requests = std::move(reqs);
  log.outputs = std::move(outs);
  return log;
}

trace::RecordedRequest rec(uint64_t id, double ts, json params, std::string route = "", std::string body = "") {
  trace::RecordedRequest r;
  r.id = id;
  r.ts = ts;
  r.step = int64_t(id);
  r.prompt_token_ids = {1, 2, int(id)};
  r.params = std::move(params);
  r.route = std::move(route);
  r.body = std::move(body);
  return r;
}

}  // namespace

TEST(ReplayPlan, OffsetsParamsAndAborts) {
  trace::RecordedOutput aborted;
  aborted.request_id = 1;
  aborted.finish_reason = "abort";
  aborted.step = 7;
  aborted.ts = 1500;
  const auto plan = plan_replay(log_of({rec(0, 1000, {{"temperature", 0}, {"seed", 3}}),
                                        rec(1, 1250, {{"temperature", 0.5}, {"seed", 9}, {"n", 2}})},
                                       {aborted}));
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].offset_us, 0);
  EXPECT_EQ(plan[1].offset_us, 250);
  EXPECT_EQ(plan[1].params.n, 2);
  EXPECT_EQ(*plan[1].params.seed, 9u);
  EXPECT_EQ(plan[0].abort_step, -1);
  EXPECT_EQ(plan[1].abort_step, 7);
  EXPECT_EQ(plan[1].abort_offset_us, 500);
  // Unknown parameters (another version) and invalid values are errors naming the request.
  try {
    plan_replay(log_of({rec(4, 0, {{"temperature", 0}, {"warp_factor", 9}})}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("request 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("warp_factor"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_replay(log_of({rec(0, 0, {{"top_p", 0}})})), Error);
}

TEST(ReplayPlan, HttpBodies) {
  const auto plan = plan_replay(log_of({rec(0, 0, {{"temperature", 0.7}, {"seed", 11}, {"max_tokens", 5}}),
                                        rec(1, 0, {{"temperature", 0}}, "/v1/completions", R"({"prompt":"hi"})"),
                                        rec(2, 0, {{"temperature", 0}}, "/v1/chat/completions", R"({"messages":[]})")}));
  const HttpRequest a = http_request(plan[0]);  // in-process: a completions body of ids
  EXPECT_EQ(a.route, "/v1/completions");
  const json ja = json::parse(a.body);
  EXPECT_EQ(ja["prompt"], json::array({1, 2, 0}));
  EXPECT_EQ(ja["seed"], 11);
  EXPECT_EQ(ja["max_tokens"], 5);
  EXPECT_FALSE(ja.contains("top_p"));  // defaults left out
  const HttpRequest b = http_request(plan[1]);
  EXPECT_EQ(json::parse(b.body), json::parse(R"({"prompt":"hi","return_token_ids":true})"));
  EXPECT_EQ(http_request(plan[2]).body, R"({"messages":[]})");  // as received
}

TEST(TargetUrl, OnlyTheGivenServer) {
  const TargetUrl t = parse_target_url("http://127.0.0.1:8000/");
  EXPECT_EQ(t.origin(), "http://127.0.0.1:8000");
  EXPECT_EQ(t.path("/v1/completions"), "/v1/completions");
  EXPECT_EQ(parse_target_url("https://example.org/api").path("/v1/messages"), "/api/v1/messages");
  EXPECT_EQ(parse_target_url("https://example.org").port, 443);
  EXPECT_EQ(parse_target_url("http://[::1]:9").host, "::1");
  for (const char* bad : {"127.0.0.1:8000", "ftp://h", "http://", "http://u:p@h:1", "http://h:0",
                          "http://h:99999", "http://h:1/x?y=1", "http://h:port"})
    EXPECT_THROW(parse_target_url(bad), Error) << bad;
}

TEST(ResponseReader, EveryRouteWholeAndStreamed) {
  ResponseReader c("/v1/completions");
  c.read_whole(R"({"choices":[{"index":0,"text":"ab","token_ids":[5,6],"finish_reason":"length"}]})");
  ASSERT_EQ(c.choices().size(), 1u);
  EXPECT_EQ(c.choices()[0].token_ids, (std::vector<int>{5, 6}));
  EXPECT_TRUE(c.choices()[0].has_token_ids);

  ResponseReader s("/v1/chat/completions");
  EXPECT_FALSE(s.feed_sse_line(R"(data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]})"));
  EXPECT_TRUE(s.feed_sse_line(R"(data: {"choices":[{"index":0,"delta":{"content":"he"}}]})"));
  EXPECT_TRUE(s.feed_sse_line(R"(data: {"choices":[{"index":0,"delta":{"content":"y"},"finish_reason":"stop"}]})"));
  EXPECT_FALSE(s.feed_sse_line("data: [DONE]"));
  EXPECT_EQ(s.choices()[0].text, "hey");
  EXPECT_EQ(s.choices()[0].finish_reason, "stop");
  EXPECT_FALSE(s.choices()[0].has_token_ids);

  ResponseReader m("/v1/messages");
  m.read_whole(R"({"content":[{"type":"text","text":"x"}],"stop_reason":"max_tokens"})");
  EXPECT_EQ(m.choices()[0].text, "x");
  EXPECT_EQ(m.choices()[0].finish_reason, "length");
  ResponseReader r("/v1/responses");
  r.read_whole(R"({"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"z"}]}]})");
  EXPECT_EQ(r.choices()[0].text, "z");
  EXPECT_EQ(r.choices()[0].finish_reason, "stop");
  EXPECT_THROW(ResponseReader("/v1/completions").read_whole("not json"), Error);
}
