// Request parsing and validation: every bad input is an ApiError 400 naming the parameter.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace nanovllm::server {
namespace {

// Runs `f` and returns the ApiError it throws (fails the test when it throws nothing).
template <class F>
ApiError error_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError thrown";
  return ApiError(0, "", "");
}

TEST(CompletionRequest, TextPromptAndSampling) {
  auto r = parse_completion_request(R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0,
      "top_p":0.5,"top_k":3,"min_p":0.1,"seed":7,"stop":["a","b"],"stop_token_ids":[4,5],
      "ignore_eos":true,"min_tokens":2,"stream":true,"stream_options":{"include_usage":true}})");
  EXPECT_FALSE(r.chat);
  EXPECT_EQ(r.model, "m");
  ASSERT_TRUE(std::holds_alternative<std::string>(r.prompt));
  EXPECT_EQ(std::get<std::string>(r.prompt), "hi");
  EXPECT_EQ(r.params.max_tokens, 5);
  EXPECT_EQ(r.params.temperature, 0.f);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.5f);
  EXPECT_EQ(r.params.top_k, 3);
  EXPECT_FLOAT_EQ(r.params.min_p, 0.1f);
  ASSERT_TRUE(r.params.seed.has_value());
  EXPECT_EQ(*r.params.seed, 7u);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int>{4, 5}));
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_EQ(r.params.min_tokens, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_FALSE(r.continuous_usage);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.params.logprobs, -1);
  auto c = parse_completion_request(R"({"prompt":"hi","stream":true,
      "stream_options":{"include_usage":true,"continuous_usage_stats":true}})");
  EXPECT_TRUE(c.continuous_usage);
  EXPECT_THROW(parse_completion_request(R"({"prompt":"hi","stream":true,
      "stream_options":{"continuous_usage_stats":"yes"}})"), std::exception);
}

TEST(CompletionRequest, DefaultsFollowOpenAI) {
  auto r = parse_completion_request(R"({"prompt":"x"})");
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_EQ(r.params.temperature, 1.f);
  EXPECT_FALSE(r.params.seed.has_value());
  EXPECT_FALSE(r.stream);
  // Explicit nulls mean "absent".
  auto n = parse_completion_request(R"({"prompt":"x","max_tokens":null,"stop":null,"seed":null})");
  EXPECT_EQ(n.params.max_tokens, 16);
  EXPECT_TRUE(n.params.stop.empty());
}

TEST(CompletionRequest, PromptForms) {
  auto ids = parse_completion_request(R"({"prompt":[1,2,3]})");
  EXPECT_EQ(std::get<std::vector<int>>(ids.prompt), (std::vector<int>{1, 2, 3}));
  auto one = parse_completion_request(R"({"prompt":["only"]})");
  EXPECT_EQ(std::get<std::string>(one.prompt), "only");
  auto nested = parse_completion_request(R"({"prompt":[[9,8]]})");
  EXPECT_EQ(std::get<std::vector<int>>(nested.prompt), (std::vector<int>{9, 8}));
  auto single_stop = parse_completion_request(R"({"prompt":"x","stop":"END"})");
  EXPECT_EQ(single_stop.params.stop, (std::vector<std::string>{"END"}));
}

TEST(CompletionRequest, Logprobs) {
  auto r = parse_completion_request(R"({"prompt":"x","logprobs":3})");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_EQ(error_of([] { parse_completion_request(R"({"prompt":"x","logprobs":21})"); }).param, "logprobs");
}

TEST(CompletionRequest, ReturnTokenIds) {
  EXPECT_FALSE(parse_completion_request(R"({"prompt":"x"})").return_token_ids);
  EXPECT_TRUE(parse_completion_request(R"({"prompt":"x","return_token_ids":true})").return_token_ids);
  EXPECT_EQ(error_of([] { parse_completion_request(R"({"prompt":"x","return_token_ids":1})"); }).param,
            "return_token_ids");
}

TEST(CompletionRequest, RejectsBadInput) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"prompt":"x","temperature":"hot"})", "temperature"},
      {R"({"prompt":"x","temperature":-1})", "temperature"},
      {R"({"prompt":"x","top_p":0})", "top_p"},
      {R"({"prompt":"x","top_p":1.5})", "top_p"},
      {R"({"prompt":"x","min_p":2})", "min_p"},
      {R"({"prompt":"x","max_tokens":0})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":1.5})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":"3"})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":99999999999})", "max_tokens"},
      {R"({"prompt":"x","n":65})", "n"},
      {R"({"prompt":"x","n":0})", "n"},
      {R"({"prompt":"x","n":2,"best_of":1})", "best_of"},
      {R"({"prompt":"x","n":2,"best_of":3,"stream":true})", "best_of"},
      {R"({"prompt":"x","echo":1})", "echo"},
      {R"({"prompt":"x","echo":true,"logprobs":1})", "echo"},
      {R"({"prompt":"x","suffix":"y"})", "suffix"},
      {R"({"prompt":"x","tools":[]})", "tools"},
      {R"({"prompt":"x","stop":[1]})", "stop"},
      {R"({"prompt":"x","stop":""})", "stop"},
      {R"({"prompt":"x","stop_token_ids":[-1]})", "stop_token_ids"},
      {R"({"prompt":"x","stream":"yes"})", "stream"},
      {R"({"prompt":"x","stream_options":{"include_usage":true}})", "stream_options"},
      {R"({"prompt":"x","min_tokens":5,"max_tokens":2})", "min_tokens"},
      {R"({"prompt":"x","ignore_eos":1})", "ignore_eos"},
      {R"({"prompt":"x","presence_penalty":2.5})", "presence_penalty"},  // outside [-2, 2]
      {R"({"prompt":"x","model":3})", "model"},
      {R"({"prompt":5})", "prompt"},
      {R"({"prompt":[]})", "prompt"},
      {R"({"prompt":["a","b"]})", "prompt"},
      {R"({"prompt":[1,"b"]})", "prompt"},
      {R"({"max_tokens":3})", "prompt"},
  };
  for (const auto& c : cases) {
    ApiError e = error_of([&] { parse_completion_request(c.body); });
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.what();
    EXPECT_FALSE(std::string(e.what()).empty()) << c.body;
    // Messages are for clients: no source locations.
    EXPECT_EQ(std::string(e.what()).find(".cc:"), std::string::npos) << e.what();
  }
}

TEST(CompletionRequest, MalformedJson) {
  for (const char* body : {"", "{", "{\"prompt\": }", "[1,2]", "\"text\"", "null"}) {
    ApiError e = error_of([&] { parse_completion_request(body); });
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.code, "invalid_json") << body;
  }
}

TEST(ChatRequest, MessagesAndOptions) {
  auto r = parse_chat_request(R"({"messages":[{"role":"system","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
      {"role":"assistant","content":null,"tool_calls":[]}],
      "max_tokens":9,"max_completion_tokens":4,"logprobs":true,"top_logprobs":2,
      "chat_template_kwargs":{"enable_thinking":false},
      "tools":[{"type":"function","function":{"name":"f"}}]})");
  EXPECT_TRUE(r.chat);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0]["content"], "be brief");
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_TRUE(r.messages[2].contains("tool_calls"));
  EXPECT_EQ(r.params.max_tokens, 4);  // max_completion_tokens wins
  EXPECT_TRUE(r.max_tokens_set);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.params.logprobs, 2);
  EXPECT_EQ(r.template_kwargs["enable_thinking"], false);
  ASSERT_TRUE(r.template_kwargs.contains("tools"));
  EXPECT_EQ(r.template_kwargs["tools"][0]["function"]["name"], "f");
  EXPECT_TRUE(r.add_generation_prompt);
}

TEST(ChatRequest, MaxTokensUnsetMeansRestOfContext) {
  auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}]})");
  EXPECT_FALSE(r.max_tokens_set);
  EXPECT_EQ(r.params.logprobs, -1);
  // tool_choice "none": the template does not see the tools.
  auto none = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],
      "tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"})");
  EXPECT_FALSE(none.template_kwargs.contains("tools"));
}

TEST(ChatRequest, RejectsBadInput) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({})", "messages"},
      {R"({"messages":[]})", "messages"},
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[{"content":"x"}]})", "messages"},
      {R"({"messages":[{"role":"user","content":5}]})", "messages"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "messages"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":1})", "logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":50})", "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":[]})", "chat_template_kwargs"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":{}})", "tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":-3})", "n"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":-4})", "max_tokens"},
  };
  for (const auto& c : cases) {
    ApiError e = error_of([&] { parse_chat_request(c.body); });
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.what();
  }
}

// Hostile bodies: 400s with a clear message, never a crash or a 500.
std::string deep(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(HostileRequest, DeepNestingEverywhere) {
  const std::string d = deep(30000);
  const std::vector<std::string> bodies = {
      R"({"messages":[{"role":"user","content":"hi","x":)" + d + "}]}",
      R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":)" +
          d + "}}]}",
      R"({"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"k":)" + d + "}}",
  };
  for (const auto& body : bodies) {
    ApiError e = error_of([&] { parse_chat_request(body); });
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.code, "invalid_json");
    EXPECT_NE(std::string(e.what()).find("nested deeper than 128 levels"), std::string::npos) << e.what();
  }
  ApiError e = error_of([&] { parse_completion_request(R"({"prompt":)" + d + "}"); });
  EXPECT_EQ(e.status, 400);
  // The limit is a parameter; a body exactly at it parses.
  const std::string at_limit = R"({"messages":[{"role":"user","content":"hi","x":)" + deep(5) + "}]}";
  EXPECT_NO_THROW(parse_chat_request(at_limit, 8));  // body 1 + messages 2 + message 3 + x 4..8
  EXPECT_EQ(error_of([&] { parse_chat_request(at_limit, 7); }).status, 400);
}

TEST(HostileRequest, NumbersOutOfRange) {
  ApiError e = error_of([] { parse_completion_request(R"({"prompt":"x","temperature":1e309})"); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_json");
  EXPECT_NE(std::string(e.what()).find("number overflow"), std::string::npos) << e.what();
  EXPECT_EQ(error_of([] { parse_completion_request(R"({"prompt":"x","temperature":1e308})"); }).status, 400);
  EXPECT_EQ(error_of([] { parse_completion_request(R"({"prompt":"x","max_tokens":1e400})"); }).status, 400);
  EXPECT_EQ(error_of([] { parse_completion_request(R"({"prompt":"x","seed":99999999999999999999999})"); }).status,
            400);
}

}  // namespace
}  // namespace nanovllm::server
