// parse_json(): the one JSON reader. Depth and size limits are errors (never a stack overflow
// or a nlohmann exception), numbers out of range are errors, and good input parses as usual.
#include <gtest/gtest.h>

#include <string>

#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm {
namespace {

std::string nested(size_t depth, const std::string& leaf = "1") {
  return std::string(depth, '[') + leaf + std::string(depth, ']');
}

std::string error_of(const std::string& text, const JsonLimits& lim = {}) {
  try {
    (void)parse_json(text, "test input", lim);
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("WRONG EXCEPTION TYPE: ") + e.what();
  }
  return "";
}

TEST(JsonBounded, DepthLimitIsExact) {
  JsonLimits lim;
  lim.max_depth = 8;
  EXPECT_EQ(error_of(nested(8), lim), "");
  const std::string e = error_of(nested(9), lim);
  EXPECT_NE(e.find("test input: JSON nested deeper than 8 levels"), std::string::npos) << e;
  // Objects count like arrays.
  EXPECT_EQ(error_of(R"({"a":{"b":{"c":1}}})", JsonLimits{3, 1 << 20}), "");
  EXPECT_NE(error_of(R"({"a":{"b":{"c":{}}}})", JsonLimits{3, 1 << 20}).find("deeper than 3"), std::string::npos);
}

TEST(JsonBounded, HostileDepthIsAnErrorNotACrash) {
  // 1,000,000 levels (2 MB): the default limit (512) stops the parse early.
  for (const std::string& text : {nested(1000000), nested(30000, "{\"x\":[]}"), std::string(1000000, '[')}) {
    const std::string e = error_of(text);
    EXPECT_NE(e.find("deeper than 512"), std::string::npos) << e.substr(0, 200);
  }
}

TEST(JsonBounded, SizeLimit) {
  JsonLimits lim;
  lim.max_bytes = 10;
  EXPECT_EQ(error_of("[1,2,3,4]", lim), "");
  EXPECT_NE(error_of("[1,2,3,4,5]", lim).find("11 bytes, more than the limit of 10"), std::string::npos);
}

TEST(JsonBounded, InvalidJsonAndNumberOverflow) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "nul", "[1] x", "{\"t\": 1e309}", "-1e400"}) {
    const std::string e = error_of(bad);
    EXPECT_EQ(e.rfind("test input: malformed JSON: ", 0), 0u) << bad << " -> " << e;
  }
  EXPECT_NE(error_of("{\"temperature\": 1e309}").find("number overflow"), std::string::npos);
}

TEST(JsonBounded, GoodInputParses) {
  const auto j = parse_json(R"({"b":[1,2.5,"x",null,true],"a":{"c":-3}})", "t");
  EXPECT_EQ(j["b"][1], 2.5);
  EXPECT_EQ(j["a"]["c"], -3);
  EXPECT_EQ(j["b"][3], nullptr);
  const auto o = parse_ordered_json(R"({"z":1,"a":2})", "t");
  EXPECT_EQ(o.begin().key(), "z");  // insertion order kept
  EXPECT_EQ(parse_json("1e308", "t").get<double>(), 1e308);
}

TEST(JsonBounded, DepthOfBuiltValuesWithoutRecursion) {
  EXPECT_EQ(json_depth(nlohmann::json(3)), 0u);
  EXPECT_EQ(json_depth(parse_json("[]", "t")), 1u);
  EXPECT_EQ(json_depth(parse_json(R"({"a":[1,{"b":[]}],"c":{}})", "t")), 4u);
  nlohmann::ordered_json deep = nlohmann::ordered_json::array();
  for (int i = 0; i < 200000; ++i) {  // moved, never copied: a copy would recurse
    nlohmann::ordered_json outer = nlohmann::ordered_json::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  EXPECT_EQ(json_depth(deep), 200001u);
}

}  // namespace
}  // namespace nanovllm
