// End-to-end check of constrained generation: tokens drawn at random from the masks until EOS
// must form text that an independent validator accepts (Python's jsonschema, re, set
// membership; validate.py), and generation never gets stuck.
#include <algorithm>
#include <random>

#include "chat/tool_parser.h"
#include "structured/json_schema.h"
#include "structured/tool_constraint.h"
#include "test_util.h"
#include "tokenizer/utf8.h"

namespace nanovllm::structured {
namespace {

const char* kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
        "email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":4}},
        "required":["name","age"],"additionalProperties":false})",
    R"({"type":"object","properties":{"weather":{"enum":["sunny","rain","snow"]},"temp":{"type":"number","minimum":-50,
        "maximum":60},"ok":{"type":"boolean"},"note":{"type":["string","null"]}},"required":["weather","temp","ok","note"],
        "additionalProperties":false})",
    R"({"type":"array","items":{"type":"object","properties":{"id":{"type":"string","format":"uuid"},"when":{"type":"string",
        "format":"date-time"},"day":{"type":"string","format":"date"}},"required":["id","when","day"]},"minItems":1,"maxItems":3})",
    R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array",
        "items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["value"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
    R"({"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}-\\d{3}$"},"word":{"type":"string",
        "pattern":"ab|c"},"free":{"type":"string","minLength":2,"maxLength":4},"neg":{"type":"string","pattern":"^[^\\d\\s]+$"}},
        "required":["code","word","free","neg"]})",
    R"({"anyOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind","x"],
        "additionalProperties":false},{"type":"object","properties":{"kind":{"const":"b"},"y":{"type":"number"}},
        "required":["kind","y"],"additionalProperties":false}]})",
    R"({"type":"object","additionalProperties":{"type":"integer","exclusiveMinimum":0},"maxProperties":3})",
    R"({"type":"object","properties":{"a":{"type":"null"}},"required":["a"],"additionalProperties":{"type":"boolean"}})",
    R"({"type":"object","properties":{"p":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},"q":{"type":"number"},
        "ip":{"type":"string","format":"ipv4"},"t":{"type":"string","format":"time"}},"required":["p","q","ip","t"]})",
    R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string","enum":["x","y"]}],"items":{"type":"boolean"},
        "minItems":2,"maxItems":5})",
    R"({"type":"object"})",
    R"(true)"};

const char* kRegexes[] = {"[a-z]{1,8}@[a-z]+\\.(com|org)", "\\d{3}-\\d{4}", "(yes|no|maybe)( [A-Z][a-z]*)*",
                          "[^\\n]{0,12}\\n[0-9]+", "(\\w+\\s?){1,4}", "\\((-?[0-9]+(\\.[0-9]{1,2})?),\\s*[A-Za-zé]+\\)"};

// Whether `s` has objects with free keys (additionalProperties, or no properties declared).
// The grammar keeps declared keys unique, but free keys may repeat (comparing keys is beyond
// a context-free grammar), so the validator accepts duplicates there.
bool free_keys(const nlohmann::json& s) {
  if (s.is_boolean()) return s.get<bool>();  // also "uniqueItems": true...: a harmless maybe
  if (s.is_array()) return std::any_of(s.begin(), s.end(), free_keys);
  if (!s.is_object()) return false;
  if ((s.contains("type") && s["type"] == "object") || s.contains("additionalProperties")) {
    auto ap = s.find("additionalProperties");
    if (ap != s.end() ? !(ap->is_boolean() && !ap->get<bool>()) : !s.contains("properties")) return true;
  }
  for (auto& [k, v] : s.items())
    if (k != "enum" && k != "const" && free_keys(v)) return true;
  return false;
}

void run(const std::shared_ptr<const TokenIndex>& vocab, int docs_per_case, uint32_t seed) {
  std::mt19937 rng(seed);
  nlohmann::json cases = nlohmann::json::array();
  int unfinished = 0;
  auto add = [&](nlohmann::json c, const std::shared_ptr<const CompiledGrammar>& g, int eos_spread) {
    c["docs"] = nlohmann::json::array();
    for (int d = 0; d < docs_per_case; ++d) {
      testing::Sampled s = testing::sample_document(g, rng, 3000, eos_spread ? static_cast<int>(rng() % eos_spread) : 0);
      if (::testing::Test::HasFailure()) return;
      if (!s.finished) {
        std::printf("unfinished (%d tokens) under %s: %.200s\n", s.steps, c.dump().c_str(), s.text.c_str());
        ++unfinished;
        continue;
      }
      ASSERT_TRUE(utf8::is_valid(s.text)) << s.text;
      c["docs"].push_back(s.text);
    }
    cases.push_back(c);
  };
  for (const char* s : kSchemas) {
    auto schema = parse_json_schema(s);
    nlohmann::json j = nlohmann::json::parse(s);
    add({{"kind", "schema"}, {"schema", j}, {"free_keys", free_keys(j)}}, compile(json_schema_grammar(schema), vocab), 0);
  }
  for (const char* r : kRegexes) add({{"kind", "regex"}, {"regex", r}}, compile(regex_grammar(r), vocab), 30);
  std::vector<std::string> choices = {"positive", "negative", "neutral", "neg", "a \"quoted\" é choice"};
  add({{"kind", "choice"}, {"choices", choices}}, compile(choice_grammar(choices), vocab), 5);
  EXPECT_LE(unfinished, docs_per_case) << "documents that did not finish within 3000 tokens";

  std::string out;
  int rc = testing::run_validator(cases.dump(), &out);
  if (rc == 77) GTEST_SKIP() << "validator unavailable: " << out;
  EXPECT_EQ(rc, 0) << out;
  std::printf("%s", out.c_str());
}

const char* kTools = R"([
  {"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{
    "city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"]}}},
  {"type":"function","function":{"name":"search","parameters":{"$defs":{"n":{"type":"integer","minimum":1,"maximum":10}},
    "type":"object","properties":{"query":{"type":"string","maxLength":12},"max":{"$ref":"#/$defs/n"}},"required":["query"]}}},
  {"type":"function","function":{"name":"now"}}])";

// tool_choice "required" (Hermes) and a named function (Llama-3 JSON): every output parses into
// calls of the allowed tools with no content, and each call's arguments validate against the
// tool's parameters.
void run_tools(const std::shared_ptr<const TokenIndex>& vocab, int docs, uint32_t seed) {
  std::mt19937 rng(seed);
  auto tools = nlohmann::ordered_json::parse(kTools);
  std::map<std::string, nlohmann::json> params;
  for (auto& t : tools)
    params[t["function"]["name"]] = t["function"].value("parameters", nlohmann::ordered_json{{"type", "object"}});
  nlohmann::json cases = nlohmann::json::array();
  for (auto& [choice, format] : {std::pair<nlohmann::ordered_json, chat::ToolCallFormat>{"required", chat::ToolCallFormat::kHermes},
                                 {{{"type", "function"}, {"function", {{"name", "search"}}}}, chat::ToolCallFormat::kLlama3Json}}) {
    auto g = compile(tool_call_grammar(tools, choice, format), vocab);
    for (int d = 0; d < docs; ++d) {
      testing::Sampled s = testing::sample_document(g, rng, 3000, static_cast<int>(rng() % 60));
      ASSERT_TRUE(s.finished) << s.text;
      chat::ParsedToolCalls r = chat::parse_tool_calls(s.text, format);
      EXPECT_EQ(r.content, "") << s.text;
      ASSERT_FALSE(r.calls.empty()) << s.text;
      if (choice.is_object()) {
        EXPECT_EQ(r.calls.size(), 1u) << s.text;
      }
      for (auto& c : r.calls) {
        ASSERT_TRUE(params.count(c.name)) << c.name;
        if (choice.is_object()) {
          EXPECT_EQ(c.name, "search");
        }
        cases.push_back({{"kind", "schema"}, {"schema", params[c.name]}, {"docs", {c.arguments}}});
      }
    }
  }
  std::string out;
  int rc = testing::run_validator(cases.dump(), &out);
  if (rc == 77) GTEST_SKIP() << "validator unavailable: " << out;
  EXPECT_EQ(rc, 0) << out;
}

TEST(Generation, ToolCallsFollowTheToolsSyntheticVocab) { run_tools(testing::byte_vocab({"<tool_call>", "\n</tool_call>", "{\"name\": \""}), 10, 8); }

TEST(Generation, SharedDataToolCallsFollowTheToolsQwen3) {
  if (!testing::have_qwen3()) GTEST_SKIP() << "no Qwen3 tokenizer in " << testing::shared_data();
  run_tools(testing::qwen3_vocab(), 10, 9);
}

TEST(Generation, RandomDocumentsValidateSyntheticVocab) {
  std::vector<std::string> extra;
  for (std::string t : {"{\"", "\":", "\": \"", "\", \"", "\"}", "}]", "}, {\"", "[{\"", "true", "false", "null", "12",
                        "0.", "e-", "\\n", "\\\"", "é", "東京", "  ", "\n  ", "abc", "-12", "\xE6\x9D", "\xB1"})
    extra.push_back(t);
  run(testing::byte_vocab(extra), 12, 5);
}

TEST(Generation, SharedDataRandomDocumentsValidateQwen3) {
  if (!testing::have_qwen3()) GTEST_SKIP() << "no Qwen3 tokenizer in " << testing::shared_data();
  run(testing::qwen3_vocab(), 10, 6);
}

TEST(Generation, SharedDataRandomDocumentsValidateSentencePiece) {
  std::string dir = testing::shared_data() + "/models/stories260K-hf";
  if (!std::ifstream(dir + "/tokenizer.json").good()) GTEST_SKIP() << "no stories260K in " << testing::shared_data();
  auto tok = Tokenizer::from_dir(dir);
  run(TokenIndex::from_tokenizer(*tok, {2}), 6, 7);
}

}  // namespace
}  // namespace nanovllm::structured
