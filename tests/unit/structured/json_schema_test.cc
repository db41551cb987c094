// JSON Schema grammars, hand-checked: which texts are complete matches, and which schema
// features are rejected with a message naming them.
#include "structured/json_schema.h"

#include <cstdlib>

#include "test_util.h"

namespace nanovllm::structured {
namespace {

using testing::byte_vocab;
using testing::full_match;
using testing::schema;


void expect_language(const std::string& s, const std::vector<std::string>& yes, const std::vector<std::string>& no) {
  auto g = schema(s);
  for (auto& t : yes) EXPECT_TRUE(full_match(g, t)) << s << "\n  should accept: " << t;
  for (auto& t : no) EXPECT_FALSE(full_match(g, t)) << s << "\n  should reject: " << t;
}

TEST(JsonSchema, AnyObject) {
  auto g = compile(json_object_grammar(), byte_vocab());
  for (std::string t : {"{}", "{\"a\":1}", "{ \"a\" : [1, {\"b\": null}], \"c\": \"x\\n\\u00e9\" }", "{\"\":-0.5e+3}",
                        "{\n  \"k\": [true, false, [], {}]\n}"})
    EXPECT_TRUE(full_match(g, t)) << t;
  for (std::string t : {"[]", "\"x\"", "{\"a\":}", "{a:1}", "{\"a\":1,}", "{\"a\":01}", "{\"a\":1", "{\"a\":\"\x01\"}",
                        "{\"a\":\"\\x\"}", "{\"a\":\"\\ud800\"}", " {}", "{}\n"})
    EXPECT_FALSE(full_match(g, t)) << t;
}

TEST(JsonSchema, RequiredOptionalAndOrder) {
  const char* s = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
                     "c":{"type":"boolean"}},"required":["a"],"additionalProperties":false})";
  expect_language(s, {"{\"a\":1}", "{\"a\":1,\"c\":true}", "{\"a\": 1, \"b\": \"x\", \"c\": false}", "{ \"a\":-7 }"},
                  {"{}", "{\"b\":\"x\"}", "{\"a\":1,\"a\":2}", "{\"c\":true,\"a\":1}", "{\"a\":1,}", "{\"a\":1,\"d\":1}",
                   "{\"a\":1.5}", "{\"a\":1 \"c\":true}"});
  // Optional members before the required one; and every member optional.
  expect_language(R"({"properties":{"a":{"type":"null"},"b":{"type":"null"}},"required":["b"]})",
                  {"{\"b\":null}", "{\"a\":null,\"b\":null}"}, {"{\"a\":null}", "{}", "{,\"b\":null}"});
  expect_language(R"({"type":"object","properties":{"a":{"const":1},"b":{"const":2}},"additionalProperties":false})",
                  {"{}", "{\"a\":1}", "{\"b\":2}", "{\"a\":1,\"b\":2}"}, {"{,}", "{\"a\":1,}", "{\"b\":2,\"a\":1}"});
}

TEST(JsonSchema, AdditionalProperties) {
  // A map of integers; and declared members followed by extra keys that differ from them.
  expect_language(R"({"type":"object","additionalProperties":{"type":"integer"}})",
                  {"{}", "{\"x\":1,\"y\":2}"}, {"{\"x\":\"s\"}"});
  expect_language(R"({"type":"object","properties":{"ab":{"type":"null"}},"required":["ab"],"additionalProperties":true})",
                  {"{\"ab\":null}", "{\"ab\":null,\"a\":1}", "{\"ab\":null,\"abc\":[]}", "{\"ab\":null,\"\":{}}"},
                  {"{\"ab\":null,\"ab\":1}", "{\"a\":1,\"ab\":null}"});
  // Absent additionalProperties with declared properties: only those are generated.
  expect_language(R"({"properties":{"a":{"type":"null"}}})", {"{}", "{\"a\":null}"}, {"{\"b\":null}"});
  // maxProperties with a fixed count: at most 1 extra member.
  expect_language(R"({"properties":{"a":{"const":0}},"required":["a"],"additionalProperties":{"const":1},"maxProperties":2})",
                  {"{\"a\":0}", "{\"a\":0,\"b\":1}"}, {"{\"a\":0,\"b\":1,\"c\":1}"});
}

TEST(JsonSchema, Arrays) {
  expect_language(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
                  {"[1]", "[1,2,3]", "[ 1 , 2 ]"}, {"[]", "[1,2,3,4]", "[1,]", "[,1]", "[\"a\"]"});
  expect_language(R"({"type":"array","items":{"type":"boolean"},"minItems":2})",
                  {"[true,false]", "[true,true,true,false]"}, {"[true]", "[]"});
  expect_language(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
                  {"[]", "[\"a\"]", "[\"a\",1]"}, {"[1]", "[\"a\",1,2]"});
  expect_language(R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"null"},"minItems":2})",
                  {"[\"a\",null]", "[\"a\",null,null]"}, {"[\"a\"]", "[\"a\",\"b\"]"});
  expect_language(R"({"type":"array","items":[{"type":"null"}],"additionalItems":false})",  // draft 7 tuple
                  {"[]", "[null]"}, {"[null,null]"});
  expect_language(R"({"type":"array"})", {"[]", "[1,\"a\",[{}]]"}, {"[1,]"});
}

TEST(JsonSchema, Strings) {
  expect_language(R"({"enum":["red","green",1,null,{"a":[1]}]})",
                  {"\"red\"", "\"green\"", "1", "null", "{\"a\":[1]}"}, {"\"blue\"", "\"re\"", "2"});
  expect_language(R"({"type":"string","enum":["a",2]})", {"\"a\""}, {"2"});  // type filters the enum
  expect_language(R"({"const":"say \"hi\""})", {"\"say \\\"hi\\\"\""}, {"\"say \"hi\"\""});
  expect_language(R"({"type":"string","minLength":2,"maxLength":3})",
                  {"\"ab\"", "\"abc\"", "\"é\\n\"", "\"\\\"\\\\\""}, {"\"a\"", "\"abcd\"", "\"\""});
  expect_language(R"({"type":"string","pattern":"^[a-z]+-\\d{2}$"})", {"\"ab-12\""}, {"\"ab-1\"", "\"Ab-12\"", "\"x ab-12\""});
  expect_language(R"({"type":"string","pattern":"b"})", {"\"b\"", "\"abc\"", "\"x\\nb\""}, {"\"\"", "\"ac\""});
  expect_language(R"({"type":"string","format":"date"})", {"\"2024-02-28\"", "\"1999-12-31\""},
                  {"\"2024-02-30\"", "\"2024-13-01\"", "\"24-01-01\""});
  expect_language(R"({"type":"string","format":"date-time"})", {"\"2024-01-02T03:04:05Z\"", "\"2024-01-02T03:04:05.5+01:00\""},
                  {"\"2024-01-02 03:04:05Z\""});
  expect_language(R"({"type":"string","format":"uuid"})", {"\"123e4567-e89b-12d3-a456-426614174000\""}, {"\"123e4567\""});
}

TEST(JsonSchema, Combinators) {
  expect_language(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})", {"1", "\"a\""}, {"\"ab\"", "true"});
  expect_language(R"({"type":["boolean","null"]})", {"true", "null"}, {"0"});
  expect_language(R"({"type":"integer","nullable":true})", {"3", "null"}, {"\"3\""});
  expect_language(R"({"allOf":[{"type":"null"}]})", {"null"}, {"1"});
  expect_language(R"({"oneOf":[{"type":"string","maxLength":1},{"type":["integer","null"]}]})", {"\"a\"", "1", "null"}, {"1.5"});
  expect_language(R"({"$defs":{"b":{"type":"object","properties":{"k":{"enum":["b","c"]}},"required":["k"]}},
                     "oneOf":[{"type":"object","properties":{"k":{"const":"a"}},"required":["k"]},{"$ref":"#/$defs/b"}]})",
                  {"{\"k\":\"a\"}", "{\"k\":\"c\"}"}, {"{\"k\":\"d\"}"});
  expect_language(R"({"$defs":{"n":{"type":"integer","minimum":0}},"type":"object","properties":{"x":{"$ref":"#/$defs/n"}},
                     "required":["x"]})", {"{\"x\":5}"}, {"{\"x\":-5}"});
  // A recursive tree through an object.
  expect_language(R"({"$ref":"#/definitions/node","definitions":{"node":{"type":"object","properties":{"v":{"type":"integer"},
                     "kids":{"type":"array","items":{"$ref":"#/definitions/node"}}},"required":["v"],"additionalProperties":false}}})",
                  {"{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]},{\"v\":4}]}"}, {"{\"v\":1,\"kids\":[{}]}"});
  expect_language("true", {"1", "{}", "[\"a\"]"}, {""});
  expect_language(R"({"type":"array","items":false})", {"[]"}, {"[1]"});
}

TEST(JsonSchema, IntegerRangesExhaustive) {
  std::vector<std::pair<std::optional<int64_t>, std::optional<int64_t>>> ranges = {
      {0, 9}, {1, 100}, {-5, 5}, {-250, -17}, {7, 7}, {99, 101}, {0, std::nullopt}, {123, std::nullopt},
      {std::nullopt, -3}, {std::nullopt, 45}, {-120, 230}, {10, 99}};
  for (auto [lo, hi] : ranges) {
    nlohmann::ordered_json s = {{"type", "integer"}};
    if (lo) s["minimum"] = *lo;
    if (hi) s["maximum"] = *hi;
    auto g = compile(json_schema_grammar(s), byte_vocab());
    for (int n = -400; n <= 400; ++n) {
      bool in = (!lo || n >= *lo) && (!hi || n <= *hi);
      ASSERT_EQ(full_match(g, std::to_string(n)), in) << s.dump() << " n=" << n;
    }
    EXPECT_FALSE(full_match(g, "-0"));
    EXPECT_FALSE(full_match(g, "007"));
    EXPECT_EQ(full_match(g, "123456789012"), !hi);
  }
  // Exclusive bounds (numeric and draft-4 boolean) and the int64 extremes.
  expect_language(R"({"type":"integer","exclusiveMinimum":2,"exclusiveMaximum":5})", {"3", "4"}, {"2", "5"});
  expect_language(R"({"type":"integer","minimum":2,"exclusiveMinimum":true,"maximum":4.5})", {"3", "4"}, {"2", "5"});
  expect_language(R"({"type":"integer","minimum":-9223372036854775807,"maximum":9223372036854775807})",
                  {"9223372036854775807", "-9223372036854775807", "0"}, {"9223372036854775808", "-9223372036854775808"});
}

TEST(JsonSchema, NumberBoundsAreSound) {
  // Every accepted number lies within the bounds (checked with strtod); some are accepted.
  const char* schemas[] = {R"({"type":"number","minimum":0,"maximum":1})",
                           R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})",
                           R"({"type":"number","minimum":-2.5,"maximum":3.25})",
                           R"({"type":"number","exclusiveMaximum":0})", R"({"type":"number","minimum":10})"};
  std::vector<std::string> texts;
  for (std::string sign : {"", "-"})
    for (std::string ip : {"0", "1", "2", "3", "9", "10", "11", "123"})
      for (std::string fr : {"", ".0", ".5", ".25", ".999999", ".000001", ".1234567"}) texts.push_back(sign + ip + fr);
  for (const char* s : schemas) {
    auto j = nlohmann::json::parse(s);
    auto g = schema(s);
    int accepted = 0;
    for (auto& t : texts) {
      if (!full_match(g, t)) continue;
      ++accepted;
      double v = std::strtod(t.c_str(), nullptr);
      if (j.contains("minimum")) {
        EXPECT_GE(v, j["minimum"].get<double>()) << s << " " << t;
      }
      if (j.contains("maximum")) {
        EXPECT_LE(v, j["maximum"].get<double>()) << s << " " << t;
      }
      if (j.contains("exclusiveMinimum")) {
        EXPECT_GT(v, j["exclusiveMinimum"].get<double>()) << s << " " << t;
      }
      if (j.contains("exclusiveMaximum")) {
        EXPECT_LT(v, j["exclusiveMaximum"].get<double>()) << s << " " << t;
      }
    }
    EXPECT_GT(accepted, 3) << s;
  }
  expect_language(R"({"type":"number","minimum":0,"maximum":1})", {"0", "1", "0.5", "1.0"}, {"1.5", "-0.5", "2"});
  expect_language(R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})", {"0.5", "0.001"}, {"0", "1", "0.0"});
  expect_language(R"({"type":"number"})", {"0", "-1.5e10", "2E-3", "1.0"}, {"1.", ".5", "01", "1e"});
}

TEST(JsonSchema, UnsupportedFeaturesAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"integer","multipleOf":3})", "'multipleOf'"},
      {R"({"not":{"type":"string"}})", "'not'"},
      {R"({"if":{},"then":{}})", "'if'"},
      {R"({"type":"object","patternProperties":{"^a":{}}})", "'patternProperties'"},
      {R"({"type":"array","uniqueItems":true})", "uniqueItems"},
      {R"({"$ref":"https://example.com/s.json"})", "only \"#...\""},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"allOf":[{"type":"object"},{"required":["a"]}]})", "'allOf' with more than one"},
      {R"({"oneOf":[{"type":"integer"},{"type":"number"}]})", "'oneOf' branches 0 and 1 may match"},
      {R"({"oneOf":[{"type":"object"},{"type":"object","properties":{"k":{"const":1}},"required":["k"]}]})", "use anyOf"},
      {R"({"$ref":"#"})", "recursive '$ref'"},
      {R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})", "recursive '$ref'"},
      {R"({"type":"string","format":"hostname"})", "format 'hostname'"},
      {R"({"type":"string","pattern":"(a)\\1"})", "backreference"},
      {R"({"type":"string","pattern":"a","minLength":2})", "combining"},
      {R"({"type":"object","properties":{"a":{}},"required":["a"],"maxProperties":0})", "matches no output"},
      {R"({"type":"array","minItems":3,"maxItems":2})", "matches no output"},
      {R"({"enum":[]})", "matches no output"},
      {R"({"type":"object","properties":{"a":{},"b":{}},"maxProperties":1})", "'maxProperties'"},
      {R"({"type":"object","minProperties":1})", "'minProperties'"},
      {R"({"type":"number","minimum":1e12})", "beyond +-1e9"},
      {R"({"type":"strnig"})", "unknown type 'strnig'"},
      {R"({"type":"object","required":["x"],"additionalProperties":false})", "required property 'x'"},
      {R"({"type":"string","maxLength":1000000})", "too large"},
      {R"({"type":"object","properties":{"a":{"type":"object","properties":{"b":{"const":1,"minimum":0}}}}})",
       "#/properties/a/properties/b"},
      {R"({"type":)", "not valid JSON"},
      {R"(5)", "must be an object or a boolean"}};
  for (auto& [s, what] : cases) {
    try {
      schema(s);
      ADD_FAILURE() << "accepted " << s;
    } catch (const ConstraintError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << s << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace nanovllm::structured
