// Chat choice shaping: <think> -> reasoning_content, tool-call text -> tool_calls with ids,
// finish_reason "tool_calls"; the stream's deltas, for any split of the text, accumulate to the
// whole message.
#include "server/choice_output.h"

#include <gtest/gtest.h>

namespace nanovllm::server {
namespace {

using nlohmann::json;

// Accumulates chat deltas the way an OpenAI client does.
json accumulate(const std::vector<json>& deltas) {
  json m{{"content", ""}, {"reasoning_content", ""}, {"tool_calls", json::array()}};
  for (const auto& d : deltas) {
    if (d.contains("content"))
      m["content"] = m["content"].get<std::string>() + d["content"].get<std::string>();
    if (d.contains("reasoning_content"))
      m["reasoning_content"] =
          m["reasoning_content"].get<std::string>() + d["reasoning_content"].get<std::string>();
    if (d.contains("tool_calls"))
      for (const auto& tc : d["tool_calls"]) {
        const size_t i = tc["index"].get<size_t>();
        auto& calls = m["tool_calls"];
        if (calls.size() <= i)
          calls.push_back(json{{"id", tc.value("id", "")}, {"name", ""}, {"arguments", ""}});
        if (tc["function"].contains("name")) calls[i]["name"] = tc["function"]["name"];
        calls[i]["arguments"] =
            calls[i]["arguments"].get<std::string>() + tc["function"].value("arguments", "");
      }
  }
  return m;
}

ChoiceOptions opts(bool reasoning, bool tools) {
  ChoiceOptions o;
  o.reasoning = reasoning;
  o.tools = tools;
  o.call_id_prefix = "call_x_";
  return o;
}

TEST(ChoiceOutput, ReasoningAndToolCalls) {
  const std::string text =
      "<think>\nplan it\n</think>\n\nSure.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": "
      "1}}\n</tool_call>";
  ChoiceOutput whole(opts(true, true));
  (void)whole.push(text);
  (void)whole.finish();
  json m = whole.message();
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["reasoning_content"], "plan it");
  EXPECT_EQ(m["content"], "Sure.");
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["tool_calls"][0]["id"], "call_x_0");
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"a", 1}}));
  EXPECT_EQ(whole.finish_reason("stop"), "tool_calls");
  EXPECT_EQ(whole.finish_reason("length"), "length");

  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ChoiceOutput s(opts(true, true));
    std::vector<json> d = s.push(text.substr(0, cut));
    for (auto& x : s.push(text.substr(cut))) d.push_back(x);
    for (auto& x : s.finish()) d.push_back(x);
    json acc = accumulate(d);
    EXPECT_EQ(acc["reasoning_content"], "plan it") << cut;
    EXPECT_EQ(acc["content"], "Sure.") << cut;
    ASSERT_EQ(acc["tool_calls"].size(), 1u) << cut;
    EXPECT_EQ(acc["tool_calls"][0]["id"], "call_x_0");
    EXPECT_EQ(acc["tool_calls"][0]["name"], "f");
    EXPECT_EQ(json::parse(acc["tool_calls"][0]["arguments"].get<std::string>()), json({{"a", 1}}))
        << cut;
  }
}

TEST(ChoiceOutput, PlainTextPassesThrough) {
  ChoiceOutput plain(opts(false, false));
  auto d = plain.push("<think>x</think><tool_call>{}</tool_call>");
  (void)plain.finish();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(plain.message()["content"], "<think>x</think><tool_call>{}</tool_call>");
  EXPECT_FALSE(plain.message().contains("tool_calls"));
  EXPECT_EQ(plain.finish_reason("stop"), "stop");
  // Thinking disabled (Qwen3 puts an empty <think></think> in the prompt): all content.
  ChoiceOutput r(opts(true, true));
  (void)r.push("just text");
  (void)r.finish();
  EXPECT_EQ(r.message()["content"], "just text");
  EXPECT_FALSE(r.message().contains("reasoning_content"));
  EXPECT_EQ(r.finish_reason("stop"), "stop");
}

TEST(ChoiceOutput, PromptOpenedThink) {
  ChoiceOptions o = opts(true, false);
  o.prompt_opened = true;  // the template ended the prompt with "<think>\n"
  ChoiceOutput c(o);
  (void)c.push("weigh it\n</think>\n\nanswer");
  (void)c.finish();
  EXPECT_EQ(c.message()["reasoning_content"], "weigh it");
  EXPECT_EQ(c.message()["content"], "answer");
}

TEST(ChoiceOutput, OnlyCallsMeansNullContent) {
  ChoiceOutput c(opts(false, true));
  (void)c.push(
      "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
      "\"h\", \"arguments\": {}}\n</tool_call>");
  (void)c.finish();
  json m = c.message();
  EXPECT_TRUE(m["content"].is_null());
  ASSERT_EQ(m["tool_calls"].size(), 2u);
  EXPECT_EQ(m["tool_calls"][1]["id"], "call_x_1");
  EXPECT_EQ(m["tool_calls"][1]["function"]["name"], "h");
}

// A call's first delta carries id, type and name; later ones only index and argument pieces.
TEST(ChoiceOutput, ToolCallJson) {
  json first = to_openai(chat::ToolCallDelta{0, "call_0", "f", ""});
  EXPECT_EQ(first["type"], "function");
  EXPECT_EQ(first["id"], "call_0");
  EXPECT_EQ(first["function"]["name"], "f");
  json later = to_openai(chat::ToolCallDelta{0, "", "", "{\"q\": 1}"});
  EXPECT_FALSE(later.contains("id"));
  EXPECT_FALSE(later["function"].contains("name"));
  EXPECT_EQ(later.dump(), R"({"function":{"arguments":"{\"q\": 1}"},"index":0})");
  json m = to_openai(chat::ToolCall{"call_0", "f", "{}"});
  EXPECT_EQ(m.dump(), R"({"function":{"arguments":"{}","name":"f"},"id":"call_0","type":"function"})");
}

}  // namespace
}  // namespace nanovllm::server
