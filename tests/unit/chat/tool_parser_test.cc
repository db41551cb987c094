// Tool-call parser: expected calls and content for hand-written outputs (Hermes / Qwen3 and
// Llama-3 JSON), the same accumulated result for every stream split, and the deltas' order (id
// and name first, then argument pieces; their OpenAI JSON: tests/unit/server/choice_output_test.cc).
#include <gtest/gtest.h>

#include "chat/tool_parser.h"

namespace nanovllm::chat {
namespace {

struct Case {
  ToolCallFormat format;
  std::string text;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

const auto H = ToolCallFormat::kHermes;
const auto L = ToolCallFormat::kLlama3Json;

const std::vector<Case> kCases = {
    {H, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
     "Let me check.\n", {{"get_weather", "{\"city\": \"Paris\", \"days\": 3}"}}},
    {H, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": [1]}\n</tool_call>\nDone.",
     "Done.", {{"a", "{}"}, {"b", "[1]"}}},
    {H, "<tool_call>{\"arguments\": {\"x\": 1}, \"name\": \"f\"}</tool_call>", "", {{"f", "{\"x\": 1}"}}},
    {H, "<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}</tool_call>", "", {{"f", "{\"x\":1}"}}},
    {H, "<tool_call>{\"name\":\"f\"}</tool_call>", "", {{"f", "{}"}}},
    {H, "<tool_call>{\"name\":\"f\",\"id\":7,\"arguments\":{\"s\":\"a}b\\\"{\",\"l\":[1,{\"k\":[]}]},\"x\":null}</tool_call>", "",
     {{"f", "{\"s\":\"a}b\\\"{\",\"l\":[1,{\"k\":[]}]}"}}},
    {H, "<tool_call>\nnot json\n</tool_call>", "<tool_call>\nnot json\n</tool_call>", {}},
    {H, "<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":1}, oops}</tool_call>after", "after", {{"f", "{\"a\":1}"}}},
    {H, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2", "", {{"f", "{\"a\": [1, 2"}}},
    {H, "<tool_call>\n{\"na", "<tool_call>\n{\"na", {}},
    {H, "<tool_call>{\"name\":\"a\"}<tool_call>{\"name\":\"b\",\"arguments\":{\"é\":\"東京\"}}</tool_call>", "",
     {{"a", "{}"}, {"b", "{\"é\":\"東京\"}"}}},
    {H, "<tool_call>\n{\"name\":\"f\",\"arguments\":{}}}\n</tool_call>", "", {{"f", "{}"}}},
    {H, "a <tool", "a <tool", {}},
    {H, "no calls at all { \"name\": \"x\" }", "no calls at all { \"name\": \"x\" }", {}},
    {H, "<tool_call>{\"arguments\":{}}</tool_call>x", "<tool_call>{\"arguments\":{}}</tool_call>x", {}},
    {H, "<tool_call>{\"name\":3}</tool_call>", "<tool_call>{\"name\":3}</tool_call>", {}},
    {H, "<tool_call>{\"name\":\"f\",\"arguments\":{\"n\":-1.5e3,\"t\":true}}</tool_call>", "",
     {{"f", "{\"n\":-1.5e3,\"t\":true}"}}},
    {H, "<tool_call>{\"name\":\"f\",\"arguments\":12}</tool_call>", "", {{"f", "12"}}},
    {L, "{\"name\": \"f\", \"parameters\": {\"a\": 1}}", "", {{"f", "{\"a\": 1}"}}},
    {L, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {\"b\": [true]}}", "",
     {{"f", "{}"}, {"g", "{\"b\": [true]}"}}},
    {L, "Hello {\"name\": \"f\"}", "Hello {\"name\": \"f\"}", {}},
    {L, "  \n{\"name\": \"f\", \"parameters\": {\"a\": \"}\"}}", "", {{"f", "{\"a\": \"}\"}"}}},
    {L, "{not json", "{not json", {}},
    {L, "{\"name\": \"f\", \"parameters\": {}} trailing words", "trailing words", {{"f", "{}"}}},
    {L, "<|python", "<|python", {}},
};

ParsedToolCalls stream(const Case& c, const std::vector<size_t>& cuts, std::vector<ToolStreamDelta>* deltas = nullptr) {
  ToolCallStreamParser p(c.format);
  ParsedToolCalls r;
  size_t prev = 0;
  auto take = [&](ToolStreamDelta d) {
    accumulate(d, r);
    if (deltas) deltas->push_back(std::move(d));
  };
  for (size_t cut : cuts) {
    take(p.push(std::string_view(c.text).substr(prev, cut - prev)));
    prev = cut;
  }
  take(p.push(std::string_view(c.text).substr(prev)));
  take(p.finish());
  return r;
}

void expect_result(const Case& c, const ParsedToolCalls& r, const std::string& how) {
  EXPECT_EQ(r.content, c.content) << c.text << " " << how;
  ASSERT_EQ(r.calls.size(), c.calls.size()) << c.text << " " << how;
  for (size_t i = 0; i < r.calls.size(); ++i) {
    EXPECT_EQ(r.calls[i].id, "call_" + std::to_string(i)) << c.text;
    EXPECT_EQ(r.calls[i].name, c.calls[i].first) << c.text << " " << how;
    EXPECT_EQ(r.calls[i].arguments, c.calls[i].second) << c.text << " " << how;
  }
}

TEST(ToolParser, ExpectedCalls) {
  for (auto& c : kCases) expect_result(c, parse_tool_calls(c.text, c.format), "one-shot");
}

TEST(ToolParser, EverySplitGivesTheSameResult) {
  for (auto& c : kCases) {
    for (size_t i = 0; i <= c.text.size(); ++i) {
      expect_result(c, stream(c, {i}), "cut at " + std::to_string(i));
      if (::testing::Test::HasFailure()) return;
    }
    std::vector<size_t> bytes;
    for (size_t i = 1; i < c.text.size(); ++i) bytes.push_back(i);
    expect_result(c, stream(c, bytes), "byte by byte");
  }
}

TEST(ToolParser, DeltasCarryIdAndNameFirst) {
  const Case& c = kCases[1];  // two calls
  std::vector<size_t> bytes;
  for (size_t i = 1; i < c.text.size(); ++i) bytes.push_back(i);
  std::vector<ToolStreamDelta> deltas;
  stream(c, bytes, &deltas);
  std::vector<int> seen(2, 0);
  for (auto& d : deltas) {
    for (auto& t : d.tool_calls) {
      ASSERT_LT(t.index, 2);
      if (seen[t.index]++ == 0) {
        EXPECT_EQ(t.id, "call_" + std::to_string(t.index));
        EXPECT_FALSE(t.name.empty());
        EXPECT_EQ(t.arguments, "");
      } else {
        EXPECT_TRUE(t.id.empty() && t.name.empty());
      }
    }
  }
  EXPECT_GT(seen[0], 1);  // arguments arrived in pieces after the name
}

TEST(ToolParser, ArgumentsStreamBeforeTheCallEnds) {
  ToolCallStreamParser p(H);
  ToolStreamDelta d = p.push("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"par");
  ASSERT_EQ(d.tool_calls.size(), 2u);  // the name, then the first piece
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(d.tool_calls[0].arguments, "");
  EXPECT_EQ(d.tool_calls[1].arguments, "{\"q\": \"par");
  d = p.push("is\"}}\n</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "is\"}");
  EXPECT_EQ(p.num_calls(), 1);
}

TEST(ToolCallFormat, FromTheTemplate) {
  EXPECT_EQ(tool_call_format_for_template("... <tool_call>\n{{ tool_call | tojson }}\n</tool_call>"), H);
  EXPECT_EQ(tool_call_format_for_template("{{- '<|python_tag|>' }}"), L);
  EXPECT_EQ(tool_call_format_for_template("{\"name\": ..., \"parameters\": ...}"), L);
  EXPECT_EQ(tool_call_format_for_template("<tool_call> and \"parameters\""), H);
  EXPECT_EQ(tool_call_format_for_template(""), H);
  EXPECT_STREQ(to_string(H), "hermes");
  EXPECT_STREQ(to_string(L), "llama3_json");
}

}  // namespace
}  // namespace nanovllm::chat
