// The bounds that make constrained JSON finite (README.md, "Whitespace and numbers"): the
// whitespace rule between tokens and the digit limits of numbers, in json_object, json_schema
// (integers and numbers, bounded or not) and tool-call arguments. Texts at each bound are
// accepted and one step beyond is rejected; an independent generator's documents within the
// bounds are all accepted; the grammar's own random walks stay within them.
#include <random>
#include <regex>

#include "structured/json_schema.h"
#include "structured/output_constraint.h"
#include "structured/tool_constraint.h"
#include "test_util.h"

namespace nanovllm::structured {
namespace {

using testing::byte_vocab;
using testing::full_match;
using testing::schema;


std::string digits(int n, char first = '1') { return std::string(1, first) + std::string(n - 1, '2'); }

TEST(JsonBounds, WhitespaceRule) {
  auto g = compile(json_object_grammar(), byte_vocab());
  std::string indent20(20, ' '), indent21(21, ' ');
  for (const std::string& t : std::vector<std::string>{"{\"a\":[1,{\"b\":null}]}", "{\"a\": [1, {\"b\": null}]}", "{ \"a\" : 1 }",
                        "{\n  \"a\": [\n    1,\n    true\n  ]\n}", "{\n\t\"a\":\n\t\t1\n}", "{\n\"a\":1\n}",
                        "{\n" + indent20 + "\"a\": 1}", "{\n \t \"a\": 1}"})
    EXPECT_TRUE(full_match(g, t)) << t;
  for (const std::string& t : std::vector<std::string>{"{\"a\":  1}", "{  \"a\":1}", "{\"a\":1\n\n}", "{\"a\":1\r\n}", "{\"a\":1 \n}",
                        "{\"a\":1\t}", "{\"a\":\t1}", "{\"a\":1\n \n}", "{\n" + indent21 + "\"a\": 1}",
                        " {}", "{}\n"})
    EXPECT_FALSE(full_match(g, t)) << t;
}

TEST(JsonBounds, WhitespaceRuleInSchemasAndCompact) {
  const char* s = R"({"type":"array","items":{"type":"integer"}})";
  auto g = schema(s);
  EXPECT_TRUE(full_match(g, "[1,2]"));
  EXPECT_TRUE(full_match(g, "[ 1, 2 ]"));
  EXPECT_TRUE(full_match(g, "[\n  1,\n  2\n]"));
  EXPECT_FALSE(full_match(g, "[  1,2]"));
  EXPECT_FALSE(full_match(g, "[1,\r\n2]"));
  JsonSchemaOptions compact;
  compact.max_indent = -1;
  auto c = schema(s, compact);
  EXPECT_TRUE(full_match(c, "[1,2]"));
  EXPECT_FALSE(full_match(c, "[1, 2]"));
  EXPECT_FALSE(full_match(c, "[1,\n2]"));
  JsonSchemaOptions narrow;
  narrow.max_indent = 2;
  auto n = schema(s, narrow);
  EXPECT_TRUE(full_match(n, "[\n  1,\n\t\t2]"));
  EXPECT_FALSE(full_match(n, "[\n   1]"));
}

// disable_any_whitespace reaches the grammar as "no whitespace", the default as the rule.
TEST(JsonBounds, DisableAnyWhitespace) {
  StructuredOutputsParams p;
  p.json_object = true;
  auto loose = compile(constraint_for(p)->build(), byte_vocab());
  std::string loose_key = constraint_for(p)->key;
  p.disable_any_whitespace = true;
  auto tight = compile(constraint_for(p)->build(), byte_vocab());
  EXPECT_NE(constraint_for(p)->key, loose_key);  // cached apart
  EXPECT_TRUE(full_match(loose, "{\"a\": 1}"));
  EXPECT_TRUE(full_match(tight, "{\"a\":1}"));
  EXPECT_FALSE(full_match(tight, "{\"a\": 1}"));
}

// Integer part <= 15 digits, fraction <= 16, exponent <= 2, in any JSON number.
TEST(JsonBounds, NumberDigits) {
  for (auto g : {compile(json_object_grammar(), byte_vocab()), schema(R"({"type":"object","properties":{
                     "a":{"type":"number"}},"required":["a"]})")}) {
    auto ok = [&](const std::string& n) { return full_match(g, "{\"a\":" + n + "}"); };
    for (const std::string& n : std::vector<std::string>{"0", "-0", digits(15), "-" + digits(15), "0." + digits(16, '0'), digits(15) + "." + digits(16),
                          "1e5", "1E+99", "-1.5e-07", digits(15) + "." + digits(16) + "e-99"})
      EXPECT_TRUE(ok(n)) << n;
    for (const std::string& n : std::vector<std::string>{digits(16), "-" + digits(16), "0." + digits(17, '0'), "1e100", "1e-001", "01", "-01", "1.",
                          ".5", "1e", "+1"})
      EXPECT_FALSE(ok(n)) << n;
  }
}

// Schema integers: an absent bound stops at 15 digits; a present one keeps its own range.
TEST(JsonBounds, IntegerDigits) {
  auto ok = [](const char* s, const std::string& n) { return full_match(schema(s), n); };
  EXPECT_TRUE(ok(R"({"type":"integer"})", digits(15)));
  EXPECT_TRUE(ok(R"({"type":"integer"})", "-" + digits(15)));
  EXPECT_FALSE(ok(R"({"type":"integer"})", digits(16)));
  EXPECT_FALSE(ok(R"({"type":"integer"})", "-" + digits(16)));
  EXPECT_FALSE(ok(R"({"type":"integer"})", "007"));
  EXPECT_TRUE(ok(R"({"type":"integer","minimum":3})", digits(15)));
  EXPECT_FALSE(ok(R"({"type":"integer","minimum":3})", digits(16)));
  EXPECT_TRUE(ok(R"({"type":"integer","maximum":-3})", "-" + digits(15)));
  EXPECT_FALSE(ok(R"({"type":"integer","maximum":-3})", "-" + digits(16)));
  // Bounds with more digits than the limit: the schema's range, in full.
  EXPECT_TRUE(ok(R"({"type":"integer","minimum":100000000000000000})", "100000000000000000"));
  EXPECT_TRUE(ok(R"({"type":"integer","minimum":100000000000000000})", "999999999999999999"));
  EXPECT_FALSE(ok(R"({"type":"integer","minimum":100000000000000000})", "1000000000000000000"));
  EXPECT_TRUE(ok(R"({"type":"integer","minimum":0,"maximum":9223372036854775807})", "9223372036854775807"));
}

// Bounded numbers (json_schema_numbers.cc) keep their <= 6 fraction digits; an open side stops
// at 15 integer digits.
TEST(JsonBounds, BoundedNumberDigits) {
  auto g = schema(R"({"type":"number","minimum":0.5})");
  EXPECT_TRUE(full_match(g, digits(15) + ".5"));
  EXPECT_TRUE(full_match(g, digits(15)));
  EXPECT_FALSE(full_match(g, digits(16) + ".5"));
  EXPECT_FALSE(full_match(g, digits(16)));
  auto h = schema(R"({"type":"number","maximum":-2})");
  EXPECT_TRUE(full_match(h, "-" + digits(15) + ".25"));
  EXPECT_FALSE(full_match(h, "-" + digits(16) + ".25"));
}

// The only digit run of the string formats: fractions of a second, at most 9 digits.
TEST(JsonBounds, TimeFraction) {
  auto g = schema(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(full_match(g, "\"2024-01-02T03:04:05.123456789Z\""));
  EXPECT_FALSE(full_match(g, "\"2024-01-02T03:04:05.1234567890Z\""));
}

const char* kTools = R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{
  "n":{"type":"integer"},"x":{"type":"number"},"any":{}},"required":["n","x"],"additionalProperties":false}}}])";

TEST(JsonBounds, ToolArguments) {
  auto tools = nlohmann::ordered_json::parse(kTools);
  auto g = compile(tool_call_grammar(tools, "required", chat::ToolCallFormat::kHermes), byte_vocab());
  auto call = [](const std::string& args) { return "<tool_call>\n{\"name\": \"f\", \"arguments\": " + args + "}\n</tool_call>"; };
  EXPECT_TRUE(full_match(g, call("{\"n\": " + digits(15) + ", \"x\": 1.5e-3}")));
  EXPECT_TRUE(full_match(g, call("{\n  \"n\": 1,\n  \"x\": 2,\n  \"any\": [" + digits(15) + "]\n}")));
  EXPECT_FALSE(full_match(g, call("{\"n\": " + digits(16) + ", \"x\": 1}")));
  EXPECT_FALSE(full_match(g, call("{\"n\": 1, \"x\": 1e100}")));
  EXPECT_FALSE(full_match(g, call("{\"n\": 1, \"x\": 1, \"any\": " + digits(16) + "}")));
  EXPECT_FALSE(full_match(g, call("{\"n\":  1, \"x\": 1}")));
  EXPECT_FALSE(full_match(g, call("{\"n\": 1,\r\n\"x\": 1}")));
}

// An independent generator: random JSON values written with random whitespace and numbers,
// all within the bounds. The grammar must accept every one.
struct Writer {
  std::mt19937& rng;
  int pick(int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); }
  std::string ws() {
    switch (pick(4)) {
      case 0: return "";
      case 1: return " ";
      default: {
        std::string s = "\n";
        for (int i = pick(kJsonMaxIndent + 1); i > 0; --i) s += pick(4) ? ' ' : '\t';
        return s;
      }
    }
  }
  std::string digit_run(int n, bool lead_nonzero) {
    std::string s;
    for (int i = 0; i < n; ++i) s += static_cast<char>('0' + (i == 0 && lead_nonzero ? 1 + pick(9) : pick(10)));
    return s;
  }
  std::string number() {
    std::string s = pick(2) ? "-" : "";
    int len = 1 + pick(kJsonMaxIntDigits);
    s += len == 1 && pick(3) == 0 ? "0" : digit_run(len, true);
    if (pick(2)) s += "." + digit_run(1 + pick(kJsonMaxFracDigits), false);
    if (pick(2)) s += std::string(pick(2) ? "e" : "E") + (pick(3) == 0 ? "" : pick(2) ? "+" : "-") + digit_run(1 + pick(kJsonMaxExpDigits), false);
    return s;
  }
  std::string value(int depth) {
    int k = pick(depth > 3 ? 4 : 6);
    if (k == 0) return number();
    if (k == 1) return "\"s" + std::to_string(pick(100)) + "\"";
    if (k == 2) return pick(2) ? "true" : "null";
    if (k == 3) return std::to_string(pick(1000));
    std::string open = k == 4 ? "[" : "{", close = k == 4 ? "]" : "}", s = open + ws();
    for (int i = 0, n = pick(4); i < n; ++i) {
      if (i) s += "," + ws();
      if (k == 5) s += "\"k" + std::to_string(i) + "\"" + ws() + ":" + ws();
      s += value(depth + 1) + ws();
    }
    return s + close;
  }
};

TEST(JsonBounds, AcceptsEveryDocumentWithinTheBounds) {
  std::mt19937 rng(31);
  Writer w{rng};
  auto g = compile(json_object_grammar(), byte_vocab());
  for (int i = 0; i < 500; ++i) {
    std::string members;
    for (int j = 0, n = w.pick(4); j < n; ++j)
      members += (j ? "," + w.ws() : "") + "\"m" + std::to_string(j) + "\"" + w.ws() + ":" + w.ws() + w.value(0) + w.ws();
    std::string doc = "{" + w.ws() + members + "}";
    ASSERT_TRUE(full_match(g, doc)) << doc;
  }
}

// Outside strings: every whitespace run is "", " " or "\n" + <= 20 of [ \t], every number is
// within the digit limits, and the document parses.
void check_within_bounds(const std::string& doc) {
  static const std::regex kNumber(R"(-?(0|[1-9][0-9]{0,14})(\.[0-9]{1,16})?([eE][+-]?[0-9]{1,2})?)");
  static const std::regex kWs("( |\n[ \t]{0,20})");
  EXPECT_TRUE(nlohmann::json::accept(doc)) << doc;
  for (size_t i = 0; i < doc.size();) {
    char c = doc[i];
    if (c == '"') {
      for (++i; doc[i] != '"'; ++i) i += doc[i] == '\\';
      ++i;
    } else if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      size_t j = doc.find_first_not_of(" \n\t\r", i);
      EXPECT_TRUE(std::regex_match(doc.substr(i, j - i), kWs)) << "whitespace at " << i << " in " << doc;
      i = j;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t j = doc.find_first_not_of("0123456789+-.eE", i);
      EXPECT_TRUE(std::regex_match(doc.substr(i, j - i), kNumber)) << doc.substr(i, j - i) << " in " << doc;
      i = j;
    } else {
      ++i;
    }
  }
}

// The grammar's random walks, with tokens that tempt runs (long whitespace, digit blocks).
TEST(JsonBounds, RandomWalksStayWithinTheBounds) {
  auto vocab = byte_vocab({"  ", "    ", "\n        ", "\r\n", "\t\t", "\n\n", "1111", "0000", "e-", ".5", "-9", "\": ", ", \""});
  std::vector<std::shared_ptr<const CompiledGrammar>> grammars = {
      compile(json_object_grammar(), vocab),
      compile(json_schema_grammar(parse_json_schema(R"({"type":"object","properties":{"i":{"type":"integer"},
          "x":{"type":"number"},"m":{"type":"number","minimum":-1},"l":{"type":"array","items":{"type":"integer"}},
          "o":{"type":"object"}},"required":["i","x","m","l","o"]})")), vocab)};
  std::mt19937 rng(7);
  for (auto& g : grammars) {
    for (int d = 0; d < 150; ++d) {
      testing::Sampled s = testing::sample_document(g, rng, 3000);
      ASSERT_TRUE(s.finished) << s.text;
      check_within_bounds(s.text);
    }
  }
}

}  // namespace
}  // namespace nanovllm::structured
