// Reasoning parser: expected splits of hand-written outputs, and the same result for every way
// of splitting the text into stream pieces.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "chat/reasoning_parser.h"

namespace nanovllm::chat {
namespace {

struct Case {
  std::string text;
  bool opened;
  std::string reasoning, content;
};

const std::vector<Case> kCases = {
    {"<think>\nLet me think.\n</think>\n\nThe answer is 4.", false, "Let me think.", "The answer is 4."},
    {"The answer.", false, "", "The answer."},
    {"Hmm.\n</think>\n\nAnswer", true, "Hmm.", "Answer"},
    {"<think>\nHmm</think>Answer", true, "Hmm", "Answer"},
    {"<think>\nstill thinking\n\n", false, "still thinking", ""},
    {"still thinking", true, "still thinking", ""},
    {"  <think>x</think>", false, "x", ""},
    {"<thinking>x</thinking>", false, "", "<thinking>x</thinking>"},
    {"<think>\na\n\nb\n</think>c\n", false, "a\n\nb", "c\n"},
    {"<think></think>", false, "", ""},
    {"Hi <think>x</think> there", false, "", "Hi <think>x</think> there"},
    {"<think>日本</think>語", false, "日本", "語"},
    {"<think>abc</thi", false, "abc</thi", ""},
    {"<thi", false, "", "<thi"},
    {"", false, "", ""},
    {"", true, "", ""},
    {"\n\n", false, "", "\n\n"},
    {"<think>\n\n</think>\n\n", false, "", ""},
    {"<think>a</think></think>b", false, "a", "</think>b"},
    {"x\n\n</think>", true, "x", ""},
};

ReasoningDelta stream(const std::string& text, bool opened, const std::vector<size_t>& cuts) {
  ReasoningStreamParser p(ReasoningOptions{opened});
  ReasoningDelta all;
  size_t prev = 0;
  for (size_t c : cuts) {
    ReasoningDelta d = p.push(std::string_view(text).substr(prev, c - prev));
    all.reasoning += d.reasoning;
    all.content += d.content;
    prev = c;
  }
  ReasoningDelta d = p.push(std::string_view(text).substr(prev));
  ReasoningDelta f = p.finish();
  return {all.reasoning + d.reasoning + f.reasoning, all.content + d.content + f.content};
}

TEST(ReasoningParser, ExpectedSplits) {
  for (auto& c : kCases) {
    ReasoningDelta r = parse_reasoning(c.text, ReasoningOptions{c.opened});
    EXPECT_EQ(r.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(r.content, c.content) << c.text;
  }
}

TEST(ReasoningParser, EverySplitGivesTheSameResult) {
  std::mt19937 rng(3);
  for (auto& c : kCases) {
    for (size_t i = 0; i <= c.text.size(); ++i) {
      ReasoningDelta r = stream(c.text, c.opened, {i});
      ASSERT_EQ(r.reasoning, c.reasoning) << c.text << " cut at " << i;
      ASSERT_EQ(r.content, c.content) << c.text << " cut at " << i;
    }
    std::vector<size_t> bytes;
    for (size_t i = 1; i < c.text.size(); ++i) bytes.push_back(i);
    ReasoningDelta r = stream(c.text, c.opened, bytes);
    EXPECT_EQ(r.reasoning, c.reasoning) << c.text << " byte by byte";
    EXPECT_EQ(r.content, c.content) << c.text << " byte by byte";
    for (int t = 0; t < 20 && c.text.size() > 2; ++t) {
      size_t a = rng() % c.text.size(), b = rng() % c.text.size();
      r = stream(c.text, c.opened, {std::min(a, b), std::max(a, b)});
      EXPECT_EQ(r.reasoning + "|" + r.content, c.reasoning + "|" + c.content) << c.text;
    }
  }
}

TEST(ReasoningParser, StreamsReasoningBeforeTheEndTag) {
  ReasoningStreamParser p;
  EXPECT_EQ(p.push("<think>\nStep one").reasoning, "Step one");
  EXPECT_TRUE(p.in_reasoning());
  ReasoningDelta d = p.push("\n</think>\n\nDone");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Done");
  EXPECT_FALSE(p.in_reasoning());
}

}  // namespace
}  // namespace nanovllm::chat
