// vLLM's structural tag: free text without triggers, each trigger continuing as one of its
// structures (begin, JSON under the schema, end), free text again after; checked by full-match
// on hand-picked strings, by sampling (every sampled text parses back into free text and valid
// tagged JSON), and every malformed spec is a ConstraintError naming it.
#include <nlohmann/json.hpp>
#include <regex>

#include "structured/structural_tag.h"
#include "test_util.h"

namespace nanovllm::structured {
namespace {

using testing::byte_vocab;
using testing::full_match;
using ojson = nlohmann::ordered_json;

ojson spec() {
  return ojson::parse(R"({
    "structures": [
      {"begin": "<function=get>", "schema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
                                              "required": ["n"], "additionalProperties": false}, "end": "</function>"},
      {"begin": "<function=put>", "schema": {"type": "boolean"}, "end": "</function>"}
    ],
    "triggers": ["<function="]})");
}

TEST(StructuralTag, Language) {
  auto g = compile(structural_tag_grammar(spec()), byte_vocab());
  for (const char* ok : {"", "hello", "a < b <function b", "<function=get>{\"n\": 3}</function>",
                         "x<function=put>true</function> y <function=get>{\"n\":0}</function>", "<functio"})
    EXPECT_TRUE(full_match(g, ok)) << ok;
  for (const char* no : {"<function=", "<function=get>{\"n\": 3}", "<function=del>{}</function>",
                         "<function=get>{\"n\": 33}</function>", "<function=put>1</function>",
                         "a<function=get>{}</function>"})
    EXPECT_FALSE(full_match(g, no)) << no;
}

TEST(StructuralTag, SampledTextsHoldTheirStructures) {
  auto g = compile(structural_tag_grammar(spec()), byte_vocab({"<function=get>", "<function=put>", "</function>", "{\"n\":"}));
  std::mt19937 rng(3);
  const std::regex tagged("<function=(get|put)>([\\s\\S]*?)</function>");
  int with_tags = 0;
  for (int i = 0; i < 200; ++i) {
    testing::Sampled s = testing::sample_document(g, rng, 400, 60);
    if (!s.finished) continue;
    std::string rest = s.text;
    for (std::sregex_iterator it(s.text.begin(), s.text.end(), tagged), e; it != e; ++it) {
      ++with_tags;
      const auto j = nlohmann::json::parse((*it)[2].str(), nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << s.text;
      if ((*it)[1] == "put") EXPECT_TRUE(j.is_boolean()) << s.text;
      else EXPECT_TRUE(j.is_object() && j["n"].is_number_integer()) << s.text;
    }
    // Outside the tags, no trigger.
    EXPECT_EQ(std::regex_replace(s.text, tagged, "").find("<function="), std::string::npos) << s.text;
  }
  EXPECT_GT(with_tags, 5);
}

TEST(StructuralTag, OverlappingTriggers) {
  // "ab" and "b": "ab" text may start either structure.
  auto g = compile(structural_tag_grammar(ojson::parse(R"({
    "structures": [{"begin": "ab", "schema": {"const": 1}, "end": "."}, {"begin": "b", "schema": {"const": 2}, "end": "!"}],
    "triggers": ["ab", "b"]})")), byte_vocab());
  EXPECT_TRUE(full_match(g, "ab1."));
  EXPECT_TRUE(full_match(g, "ab2!"));  // "a" free, then "b" starts the second
  EXPECT_TRUE(full_match(g, "xa"));
  EXPECT_FALSE(full_match(g, "xb"));
}

TEST(StructuralTag, ErrorsNameTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {R"([])", "expected an object"},
      {R"({"structures": [{"begin": "<a>", "schema": {}, "end": "</a>"}]})", "\"triggers\""},
      {R"({"structures": [], "triggers": ["<"]})", "\"structures\""},
      {R"({"structures": [{"begin": "<a>", "schema": {}, "end": "</a>"}], "triggers": [""]})", "non-empty string"},
      {R"({"structures": [{"begin": "[a]", "schema": {}, "end": "]"}], "triggers": ["<"]})", "starts with none of the triggers"},
      {R"({"structures": [{"begin": "<a>", "schema": {}, "end": "</a>"}], "triggers": ["<", "{"]})", "trigger '{' begins no structure"},
      {R"({"structures": [{"begin": "<a>", "end": "</a>"}], "triggers": ["<"]})", "schema is required"},
      {R"({"structures": [{"begin": "<a>", "schema": {"type": "integer", "multipleOf": 3}, "end": "</a>"}], "triggers": ["<"]})", "multipleOf"},
  };
  // At most 64 triggers.
  ojson many = spec();
  many["triggers"] = ojson::array();
  for (int i = 0; i < 65; ++i) many["triggers"].push_back("<function=" + std::to_string(i));
  EXPECT_THROW((void)structural_tag_grammar(many), ConstraintError);
  for (const auto& [text, want] : cases) {
    try {
      (void)structural_tag_grammar(ojson::parse(text));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConstraintError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << text << " -> " << e.what();
    }
  }
}

}  // namespace
}  // namespace nanovllm::structured
