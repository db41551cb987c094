// Response bodies, SSE framing and error objects.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/engine_loop.h"
#include "server/openai_response.h"

namespace nanovllm::server {
namespace {

using nlohmann::json;

ResponseMeta meta(bool chat) { return ResponseMeta{"id-1", "tiny", 1700000000, chat}; }

// Parses one "data: ...\n\n" event back into JSON (checks the framing on the way).
json parse_event(const std::string& ev) {
  EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
  EXPECT_GE(ev.size(), 8u);
  EXPECT_EQ(ev.substr(ev.size() - 2), "\n\n");
  std::string payload = ev.substr(6, ev.size() - 8);
  EXPECT_EQ(payload.find('\n'), std::string::npos) << "an event must be a single line";
  return json::parse(payload);
}

TEST(Sse, Framing) {
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  json j = parse_event(sse_event(json{{"a", "line1\nline2"}}));
  EXPECT_EQ(j["a"], "line1\nline2");  // newlines inside strings are escaped, not raw
}

TEST(Sse, CompletionChunk) {
  json j = parse_event(sse_event(completion_chunk(meta(false), "abc", "", nullptr)));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"], "id-1");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["created"], 1700000000);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["text"], "abc");
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_TRUE(j["choices"][0]["finish_reason"].is_null());
  json fin = completion_chunk(meta(false), "", "length", nullptr);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "length");
}

TEST(Sse, ChatChunksAndUsage) {
  json c = chat_chunk(meta(true), json{{"content", "hi"}}, "", nullptr);
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  EXPECT_EQ(c["choices"][0]["delta"]["content"], "hi");
  json u = usage_chunk(meta(true), usage_json(7, 3));
  EXPECT_EQ(u["object"], "chat.completion.chunk");
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(u["usage"]["completion_tokens"], 3);
  EXPECT_EQ(u["usage"]["total_tokens"], 10);
}

TEST(Responses, FullBodies) {
  json c = completion_response(meta(false), "out", "stop", nullptr, usage_json(2, 1));
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["text"], "out");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(c["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(c["usage"]["total_tokens"], 3);
  json ch = chat_response(meta(true), "yo", "length", nullptr, usage_json(4, 4));
  EXPECT_EQ(ch["object"], "chat.completion");
  EXPECT_EQ(ch["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(ch["choices"][0]["message"]["content"], "yo");
  EXPECT_EQ(ch["choices"][0]["finish_reason"], "length");
}

TEST(Responses, IdsAreUniqueAndPrefixed) {
  std::string a = new_response_id(false), b = new_response_id(false), c = new_response_id(true);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("cmpl-", 0), 0u);
  EXPECT_EQ(c.rfind("chatcmpl-", 0), 0u);
}

TEST(Logprobs, CompletionFormatAndOffsets) {
  TokenText text = [](int id) { return std::string(size_t(id), 'x'); };  // token id k -> k chars
  std::vector<TokenLogprobs> lps(2);
  lps[0].logprob = -0.5f;
  lps[0].top = {{2, -0.5f}, {3, -1.5f}};
  lps[1].logprob = -0.25f;
  size_t offset = 10;
  json j = completion_logprobs({2, 1}, lps, text, offset);
  EXPECT_EQ(j["tokens"], json({"xx", "x"}));
  EXPECT_EQ(j["token_logprobs"], json({-0.5, -0.25}));
  EXPECT_EQ(j["text_offset"], json({10, 12}));
  EXPECT_EQ(offset, 13u);
  EXPECT_EQ(j["top_logprobs"][0]["xxx"], -1.5);
  EXPECT_TRUE(j["top_logprobs"][1].empty());
}

TEST(Logprobs, ChatFormat) {
  TokenText text = [](int id) { return id == 1 ? std::string("\xc3\xa9") : std::string("a"); };
  std::vector<TokenLogprobs> lps(1);
  lps[0].logprob = -1.f;
  lps[0].top = {{1, -1.f}, {2, -2.f}};
  json j = chat_logprobs({1}, lps, text);
  ASSERT_EQ(j["content"].size(), 1u);
  EXPECT_EQ(j["content"][0]["token"], "\xc3\xa9");
  EXPECT_EQ(j["content"][0]["bytes"], json({0xc3, 0xa9}));
  EXPECT_EQ(j["content"][0]["top_logprobs"][1]["token"], "a");
  EXPECT_EQ(j["content"][0]["top_logprobs"][1]["logprob"], -2.0);
}

TEST(Errors, OpenAIErrorObject) {
  json j = error_json(bad_request("top_p must be in (0, 1]", "top_p"));
  ASSERT_TRUE(j.contains("error"));
  EXPECT_EQ(j["error"]["message"], "top_p must be in (0, 1]");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "top_p");
  EXPECT_EQ(j["error"]["code"], "invalid_value");
  json k = error_json(404, "nope", "");
  EXPECT_EQ(k["error"]["type"], "not_found_error");
  EXPECT_TRUE(k["error"]["param"].is_null());
  EXPECT_TRUE(k["error"]["code"].is_null());
  EXPECT_EQ(error_type_for_status(401), "authentication_error");
  EXPECT_EQ(error_type_for_status(503), "service_unavailable");
  EXPECT_EQ(error_type_for_status(500), "server_error");
}

TEST(Errors, InvalidUtf8IsReplacedNotThrown) {
  std::string s = dump_json(json{{"t", std::string("a\xff" "b")}});
  json back = json::parse(s);
  EXPECT_EQ(back["t"], "a\xef\xbf\xbd" "b");
}

TEST(Errors, ClientMessageDropsSourceLocation) {
  EXPECT_EQ(client_message("prompt has 9 tokens, more than max_model_len 4 [error at a.cc:3]"),
            "prompt has 9 tokens, more than max_model_len 4");
  EXPECT_EQ(client_message("plain"), "plain");
  EXPECT_EQ(client_message("presence_penalty must be in [-2, 2]"), "presence_penalty must be in [-2, 2]");
}

}  // namespace
}  // namespace nanovllm::server
