// The Responses and Anthropic Messages request translators (-> chat requests), their writers
// (chat deltas -> that API's events and whole objects) and the response store. The SDK-level
// checks are tests/e2e/test_api_sdks.py; these pin the mapping rules and every error.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "server/anthropic_request.h"
#include "server/anthropic_writer.h"
#include "server/api_error.h"
#include "server/response_store.h"
#include "server/responses_request.h"
#include "server/responses_writer.h"

namespace nanovllm::server {
namespace {

using nlohmann::json;

template <class F>
ApiError error_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return ApiError(0, "", "");
}

MessagesRequest messages(const json& body) { return parse_messages_request(body.dump(), 64); }

TEST(AnthropicRequest, MessagesMapToChat) {
  json body = {
      {"model", "m"},
      {"max_tokens", 7},
      {"system", json::array({{{"type", "text"}, {"text", "sys"}}})},
      {"stop_sequences", {"END"}},
      {"temperature", 0.5},
      {"top_k", 3},
      {"messages",
       {{{"role", "user"}, {"content", "hi"}},
        {{"role", "assistant"},
         {"content",
          {{{"type", "thinking"}, {"thinking", "hmm"}, {"signature", "x"}},
           {{"type", "text"}, {"text", "calling"}},
           {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "f"}, {"input", {{"a", 1}}}}}}},
        {{"role", "user"},
         {"content",
          {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "42"}, {"is_error", true}},
           {{"type", "text"}, {"text", "so?"}}}}}}}};
  MessagesRequest r = messages(body);
  const json& m = r.g.messages;
  ASSERT_EQ(m.size(), 5u) << m.dump();
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[0]["content"], "sys");
  EXPECT_EQ(m[1]["content"], "hi");
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"], "calling");
  EXPECT_EQ(m[2]["reasoning_content"], "hmm");
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(json::parse(m[2]["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"a", 1}}));
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(m[3]["tool_call_id"], "toolu_1");
  EXPECT_EQ(m[3]["content"], "Error: 42");
  EXPECT_EQ(m[4]["role"], "user");
  EXPECT_EQ(m[4]["content"], "so?");
  EXPECT_EQ(r.g.params.max_tokens, 7);
  EXPECT_EQ(r.g.params.stop, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(r.g.params.temperature, 0.5f);
  EXPECT_EQ(r.g.params.top_k, 3);
  EXPECT_FALSE(r.thinking);
  EXPECT_EQ(r.g.template_kwargs["enable_thinking"], false);  // Anthropic's default: off

  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2048}};
  EXPECT_TRUE(messages(body).thinking);
  EXPECT_EQ(messages(body).g.template_kwargs["enable_thinking"], true);
}

TEST(AnthropicRequest, ToolsAndToolChoice) {
  json body = {{"max_tokens", 50},
               {"messages", {{{"role", "user"}, {"content", "x"}}}},
               {"tools", {{{"name", "get"}, {"description", "d"},
                           {"input_schema", {{"type", "object"}, {"properties", {{"b", {{"type", "integer"}}}}}}}}}}};
  MessagesRequest auto_ = messages(body);
  EXPECT_TRUE(auto_.g.parse_tool_calls);
  EXPECT_TRUE(auto_.g.params.structured_outputs.empty());  // auto: the model chooses
  EXPECT_EQ(auto_.g.template_kwargs["tools"][0]["function"]["name"], "get");
  body["tool_choice"] = {{"type", "any"}};
  MessagesRequest any = messages(body);
  EXPECT_FALSE(any.g.params.structured_outputs.tools.empty());
  EXPECT_EQ(any.g.params.structured_outputs.tool_name, "");
  body["tool_choice"] = {{"type", "tool"}, {"name", "get"}};
  EXPECT_EQ(messages(body).g.params.structured_outputs.tool_name, "get");
  body["tool_choice"] = {{"type", "none"}};
  EXPECT_FALSE(messages(body).g.parse_tool_calls);
}

TEST(AnthropicRequest, ErrorsNameTheField) {
  const json ok = {{"max_tokens", 5}, {"messages", {{{"role", "user"}, {"content", "x"}}}}};
  auto err = [&](const std::function<void(json&)>& edit) {
    json b = ok;
    edit(b);
    return error_of([&] { messages(b); });
  };
  EXPECT_EQ(err([](json& b) { b.erase("max_tokens"); }).param, "max_tokens");
  EXPECT_EQ(err([](json& b) { b["max_tokens"] = 0; }).param, "max_tokens");
  EXPECT_EQ(err([](json& b) { b.erase("messages"); }).param, "messages");
  EXPECT_EQ(err([](json& b) { b["messages"][0]["role"] = "system"; }).param, "messages");
  ApiError img = err([](json& b) { b["messages"][0]["content"] = json::array({{{"type", "image"}}}); });
  EXPECT_NE(std::string(img.what()).find("'image'"), std::string::npos) << img.what();
  EXPECT_EQ(err([](json& b) { b["stop_sequences"] = "x"; }).param, "stop_sequences");
  EXPECT_EQ(err([](json& b) { b["stop_sequences"] = json::array({""}); }).param, "stop_sequences");
  EXPECT_EQ(err([](json& b) { b["tools"] = json::array({{{"type", "web_search_20250305"}, {"name", "w"}}}); }).param, "tools");
  EXPECT_EQ(err([](json& b) { b["tools"] = json::array({{{"name", "w"}}}); }).param, "tools");  // no input_schema
  EXPECT_EQ(err([](json& b) { b["tool_choice"] = {{"type", "sometimes"}}; }).param, "tool_choice");
  EXPECT_EQ(err([](json& b) { b["thinking"] = {{"type", "maybe"}}; }).param, "thinking");
  EXPECT_EQ(err([](json& b) { b["temperature"] = "hot"; }).param, "temperature");
  EXPECT_EQ(err([](json& b) { b["mcp_servers"] = json::array({{{"url", "x"}}}); }).param, "mcp_servers");
  // Bodies that are not JSON objects, or too deep.
  EXPECT_EQ(error_of([] { parse_messages_request("[1]", 64); }).code, "invalid_json");
  EXPECT_EQ(error_of([] { parse_messages_request(std::string(100, '[') + std::string(100, ']'), 64); }).code,
            "invalid_json");
  // count_tokens needs no max_tokens.
  EXPECT_NO_THROW(parse_count_tokens_request(R"({"messages":[{"role":"user","content":"x"}]})", 64));
}

TEST(AnthropicRequest, ErrorShape) {
  json e = anthropic_error_json(bad_request("bad", "x"));
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["message"], "bad");
  EXPECT_EQ(anthropic_error_json(ApiError(401, "k", "authentication_error"))["error"]["type"], "authentication_error");
  EXPECT_EQ(anthropic_error_json(ApiError(503, "busy", "service_unavailable"))["error"]["type"], "overloaded_error");
  EXPECT_EQ(anthropic_error_json(ApiError(500, "boom", "server_error"))["error"]["type"], "api_error");
}

// The event types (in order) of an SSE text with "event: <type>" lines.
std::vector<std::string> event_types(const std::string& sse) {
  std::vector<std::string> out;
  for (size_t p = sse.find("event: "); p != std::string::npos; p = sse.find("event: ", p + 1))
    out.push_back(sse.substr(p + 7, sse.find('\n', p) - p - 7));
  return out;
}

TEST(AnthropicWriter, BlocksInOrderAndWholeMessage) {
  AnthropicWriter w("msg_1", "m", 9);
  std::string sse = w.begin();
  sse += w.delta({{"reasoning_content", "th"}});
  sse += w.delta({{"reasoning_content", "ink"}});
  sse += w.delta({{"content", "Hel"}});
  sse += w.delta({{"content", "lo"}});
  sse += w.delta({{"tool_calls", {{{"index", 0}, {"id", "call_ab_0"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", ""}}}}}}});
  sse += w.delta({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "{\"a\":"}}}}}}});
  sse += w.delta({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "1}"}}}}}}});
  FinishInfo f;
  f.finish_reason = "tool_calls";
  f.prompt_tokens = 9;
  f.completion_tokens = 5;
  f.cached_tokens = 4;
  sse += w.finish(f);
  const std::vector<std::string> want = {
      "message_start",       "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",  "content_block_start",
      "content_block_delta", "content_block_delta", "content_block_stop",  "message_delta",       "message_stop"};
  EXPECT_EQ(event_types(sse), want);
  const json m = w.result();
  ASSERT_EQ(m["content"].size(), 3u);
  EXPECT_EQ(m["content"][0], json({{"type", "thinking"}, {"thinking", "think"}, {"signature", ""}}));
  EXPECT_EQ(m["content"][1], json({{"type", "text"}, {"text", "Hello"}}));
  EXPECT_EQ(m["content"][2]["id"], "toolu_ab_0");
  EXPECT_EQ(m["content"][2]["input"], json({{"a", 1}}));
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_EQ(m["usage"]["input_tokens"], 5);  // uncached part
  EXPECT_EQ(m["usage"]["cache_read_input_tokens"], 4);
  EXPECT_EQ(m["usage"]["output_tokens"], 5);
}

TEST(AnthropicWriter, StopReasons) {
  FinishInfo f;
  f.finish_reason = "stop";
  EXPECT_EQ(AnthropicWriter::stop_reason(f), "end_turn");
  f.stop_reason = "###";
  EXPECT_EQ(AnthropicWriter::stop_reason(f), "stop_sequence");
  f.finish_reason = "length";
  EXPECT_EQ(AnthropicWriter::stop_reason(f), "max_tokens");
  AnthropicWriter w("msg_2", "m", 1);
  (void)w.delta({{"content", "x"}});
  FinishInfo s;
  s.finish_reason = "stop";
  s.stop_reason = "###";
  (void)w.finish(s);
  EXPECT_EQ(w.result()["stop_sequence"], "###");
  // A call cut short keeps its raw arguments instead of dropping them.
  AnthropicWriter c("msg_3", "m", 1);
  (void)c.delta({{"tool_calls", {{{"index", 0}, {"id", "call_1"}, {"function", {{"name", "f"}, {"arguments", "{\"a\": 1"}}}}}}});
  FinishInfo l;
  l.finish_reason = "length";
  (void)c.finish(l);
  EXPECT_EQ(c.result()["content"][0]["input"]["_raw_arguments"], "{\"a\": 1");
}

class ResponsesRequestTest : public ::testing::Test {
 protected:
  ResponseStore store{8};
  ResponsesRequest parse(const json& b) { return parse_responses_request(b.dump(), 64, store); }
  ApiError error(const json& b) {
    return error_of([&] { parse(b); });
  }
};

TEST_F(ResponsesRequestTest, InputItemsMapToChat) {
  json body = {{"instructions", "be brief"},
               {"max_output_tokens", 9},
               {"input",
                {{{"role", "developer"}, {"content", "dev"}},
                 {{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "a"}}, {{"type", "input_text"}, {"text", "b"}}}}},
                 {{"type", "reasoning"}, {"id", "rs"}, {"summary", {{{"type", "summary_text"}, {"text", "think"}}}}},
                 {{"type", "function_call"}, {"call_id", "c1"}, {"name", "f"}, {"arguments", "{}"}},
                 {{"type", "function_call"}, {"call_id", "c2"}, {"name", "g"}, {"arguments", "{\"x\":1}"}},
                 {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "r1"}},
                 {{"type", "function_call_output"}, {"call_id", "c2"}, {"output", "r2"}}}}};
  ResponsesRequest r = parse(body);
  const json& m = r.g.messages;
  ASSERT_EQ(m.size(), 6u) << m.dump();
  EXPECT_EQ(m[0], json({{"role", "system"}, {"content", "be brief"}}));
  EXPECT_EQ(m[1]["role"], "system");  // developer
  EXPECT_EQ(m[2]["content"], "a\nb");
  EXPECT_EQ(m[3]["role"], "assistant");
  EXPECT_EQ(m[3]["reasoning_content"], "think");
  ASSERT_EQ(m[3]["tool_calls"].size(), 2u);  // consecutive calls: one assistant message
  EXPECT_EQ(m[3]["tool_calls"][1]["id"], "c2");
  EXPECT_EQ(m[4]["tool_call_id"], "c1");
  EXPECT_EQ(m[5]["content"], "r2");
  EXPECT_EQ(r.g.params.max_tokens, 9);
  EXPECT_EQ(r.conversation.size(), 5u);  // without the instructions
  EXPECT_EQ(r.echo["instructions"], "be brief");
  EXPECT_EQ(r.echo["max_output_tokens"], 9);
  EXPECT_TRUE(r.store);
}

TEST_F(ResponsesRequestTest, PreviousResponseAndFormats) {
  store.put("resp_a", json{{"id", "resp_a"}}, json::array({{{"role", "user"}, {"content", "q"}}, {{"role", "assistant"}, {"content", "ans"}}}));
  ResponsesRequest r = parse({{"previous_response_id", "resp_a"}, {"input", "next"}, {"instructions", "i"}});
  ASSERT_EQ(r.g.messages.size(), 4u);
  EXPECT_EQ(r.g.messages[2]["content"], "ans");
  EXPECT_EQ(r.g.messages[3]["content"], "next");
  EXPECT_EQ(r.echo["previous_response_id"], "resp_a");
  ApiError e = error({{"previous_response_id", "resp_zz"}, {"input", "x"}});
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "previous_response_id");
  EXPECT_EQ(e.code, "previous_response_not_found");

  // (Raw text: a json value built here would sort the keys itself.)
  ResponsesRequest js = parse_responses_request(
      R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "p", "schema": {"type": "object",
          "properties": {"z": {"type": "integer"}, "a": {"type": "string"}}}}}})",
      64, store);
  EXPECT_LT(js.g.params.structured_outputs.json.find("\"z\""), js.g.params.structured_outputs.json.find("\"a\""));
  EXPECT_TRUE(parse({{"input", "x"}, {"text", {{"format", {{"type", "json_object"}}}}}}).g.params.structured_outputs.json_object);
  EXPECT_TRUE(parse({{"input", "x"}, {"text", {{"format", {{"type", "text"}}}}}}).g.params.structured_outputs.empty());
  ResponsesRequest tools = parse({{"input", "x"}, {"tool_choice", "required"},
                                  {"tools", {{{"type", "function"}, {"name", "f"}, {"parameters", {{"type", "object"}}}}}}});
  EXPECT_TRUE(tools.g.parse_tool_calls);
  EXPECT_FALSE(tools.g.params.structured_outputs.tools.empty());
  EXPECT_EQ(parse({{"input", "x"}, {"reasoning", {{"effort", "none"}}}}).g.template_kwargs["enable_thinking"], false);
}

TEST_F(ResponsesRequestTest, ErrorsNameTheField) {
  EXPECT_EQ(error({{"max_output_tokens", 3}}).param, "input");
  EXPECT_EQ(error({{"input", 5}}).param, "input");
  EXPECT_EQ(error({{"input", json::array()}}).param, "input");
  EXPECT_EQ(error({{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "u"}}}}}}}}).param, "input");
  EXPECT_EQ(error({{"input", {{{"type", "item_reference"}, {"id", "x"}}}}}).param, "input");
  EXPECT_EQ(error({{"input", {{{"role", "tool"}, {"content", "x"}}}}}).param, "input");
  EXPECT_EQ(error({{"input", "x"}, {"tools", {{{"type", "file_search"}}}}}).param, "tools");
  EXPECT_EQ(error({{"input", "x"}, {"text", {{"format", {{"type", "yaml"}}}}}}).param, "text");
  EXPECT_EQ(error({{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}}}}}}).param, "text");
  EXPECT_EQ(error({{"input", "x"}, {"max_output_tokens", -2}}).param, "max_output_tokens");
  EXPECT_EQ(error({{"input", "x"}, {"background", true}, {"store", false}}).param, "background");
  EXPECT_EQ(error({{"input", "x"}, {"reasoning", {{"effort", "extreme"}}}}).param, "reasoning");
  EXPECT_EQ(error({{"input", "x"}, {"conversation", "conv_1"}}).param, "conversation");
  EXPECT_EQ(error({{"input", "x"}, {"truncation", "middle"}}).param, "truncation");
  EXPECT_EQ(error({{"input", "x"}, {"temperature", -1}}).param, "temperature");
}

TEST(ResponsesWriter, EventsSequenceAndItems) {
  ResponsesWriter w(json{{"id", "resp_abc"}, {"object", "response"}});
  std::string sse = w.begin();
  sse += w.delta({{"reasoning_content", "r"}});
  sse += w.delta({{"content", "Hi"}});
  sse += w.delta({{"tool_calls", {{{"index", 0}, {"id", "call_1"}, {"function", {{"name", "f"}, {"arguments", "{\"a\""}}}}}}});
  sse += w.delta({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", ":1}"}}}}}}});
  json stored_resp, stored_msg;
  w.on_finish = [&](const json& r, const json& m) {
    stored_resp = r;
    stored_msg = m;
  };
  FinishInfo f;
  f.finish_reason = "tool_calls";
  f.prompt_tokens = 3;
  f.completion_tokens = 6;
  f.reasoning_tokens = 1;
  sse += w.finish(f);
  const std::vector<std::string> types = event_types(sse);
  ASSERT_GE(types.size(), 10u);
  EXPECT_EQ(types.front(), "response.created");
  EXPECT_EQ(types[1], "response.in_progress");
  EXPECT_EQ(types.back(), "response.completed");
  // sequence_number counts every event from 0.
  int seq = 0;
  for (size_t p = sse.find("data: "); p != std::string::npos; p = sse.find("data: ", p + 1)) {
    const json ev = json::parse(sse.substr(p + 6, sse.find('\n', p) - p - 6));
    EXPECT_EQ(ev["sequence_number"], seq++);
  }
  const json r = w.result();
  EXPECT_EQ(r["status"], "completed");
  ASSERT_EQ(r["output"].size(), 3u);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "r");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Hi");
  EXPECT_EQ(r["output"][2]["arguments"], "{\"a\":1}");
  EXPECT_EQ(r["output"][2]["call_id"], "call_1");
  EXPECT_EQ(r["output"][2]["status"], "completed");
  EXPECT_NE(r["output"][0]["id"], r["output"][1]["id"]);
  EXPECT_EQ(r["usage"]["total_tokens"], 9);
  EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"], 1);
  // The stored chat message is the assistant turn in chat form.
  EXPECT_EQ(stored_msg["content"], "Hi");
  EXPECT_EQ(stored_msg["reasoning_content"], "r");
  EXPECT_EQ(stored_msg["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(stored_resp["id"], "resp_abc");
}

TEST(ResponsesWriter, CutShortIsIncomplete) {
  ResponsesWriter w(json{{"id", "resp_x"}});
  (void)w.begin();
  (void)w.delta({{"tool_calls", {{{"index", 0}, {"id", "call_1"}, {"function", {{"name", "f"}, {"arguments", "{\"a\""}}}}}}});
  FinishInfo f;
  f.finish_reason = "length";
  const std::string sse = w.finish(f);
  EXPECT_NE(sse.find("response.incomplete"), std::string::npos);
  const json r = w.result();
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
  ResponsesWriter a(json{{"id", "resp_y"}});
  f.finish_reason = "abort";
  (void)a.finish(f);
  EXPECT_EQ(a.result()["status"], "cancelled");
}

TEST(ResponseStore, BoundedAndLive) {
  ResponseStore s(2);
  int cancelled = 0;
  s.put_live("a", {[] { return json{{"status", "in_progress"}}; }, [&] { ++cancelled; }});
  EXPECT_EQ((*s.response("a"))["status"], "in_progress");
  EXPECT_FALSE(s.conversation("a"));  // a live response cannot be continued yet
  s.put("b", json{{"id", "b"}}, json::array());
  s.put("c", json{{"id", "c"}}, json::array());  // evicts "a", which is cancelled
  EXPECT_EQ(cancelled, 1);
  EXPECT_FALSE(s.response("a"));
  EXPECT_EQ(s.size(), 2u);
  bool live = true;
  EXPECT_TRUE(s.cancel("b", &live));
  EXPECT_FALSE(live);
  EXPECT_TRUE(s.erase("b"));
  EXPECT_FALSE(s.erase("b"));
  for (int i = 0; i < 100; ++i) s.put("x" + std::to_string(i), json::object(), json::array());
  EXPECT_EQ(s.size(), 2u);
  ResponseStore none(0);
  none.put("a", json::object(), json::array());
  EXPECT_EQ(none.size(), 0u);
}

}  // namespace
}  // namespace nanovllm::server
