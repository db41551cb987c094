// Constraints found in OpenAI / vLLM request bodies, their keys, and the errors that name the
// offending field.
#include "server/structured_request.h"

#include "../structured/test_util.h"  // byte_vocab, full_match

namespace nanovllm::server {
namespace {

using ojson = nlohmann::ordered_json;
using structured::ConstraintError;
using structured::RequestConstraint;
using structured::testing::byte_vocab;
using structured::testing::full_match;

std::optional<RequestConstraint> from(const char* body) { return request_constraint(ojson::parse(body)); }

TEST(RequestConstraint, FindsEachForm) {
  EXPECT_FALSE(from(R"({"model":"m"})"));
  EXPECT_FALSE(from(R"({"response_format":{"type":"text"}})"));
  EXPECT_FALSE(from(R"({"response_format":null,"guided_json":null})"));
  struct Case {
    const char* body;
    const char* param;
    const char* yes;
    const char* no;
  };
  const Case cases[] = {
      {R"({"response_format":{"type":"json_object"}})", "response_format", "{\"a\":1}", "[1]"},
      {R"({"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"integer"}}}})",
       "response_format.json_schema.schema", "12", "\"12\""},
      {R"({"structured_outputs":{"json":"{\"type\":\"boolean\"}"}})", "structured_outputs.json", "true", "1"},
      {R"({"structured_outputs":{"regex":"a+b"}})", "structured_outputs.regex", "aab", "b"},
      {R"({"structured_outputs":{"choice":["x","y"]}})", "structured_outputs.choice", "y", "xy"},
      {R"({"structured_outputs":{"json_object":true}})", "structured_outputs.json_object", "{}", "1"},
      {R"({"guided_json":{"enum":[1,2]}})", "guided_json", "2", "3"},
      {R"({"guided_regex":"\\d{2}"})", "guided_regex", "42", "4"},
      {R"({"guided_choice":["yes","no"]})", "guided_choice", "no", "maybe"},
  };
  for (auto& c : cases) {
    auto r = from(c.body);
    ASSERT_TRUE(r) << c.body;
    EXPECT_EQ(r->param, c.param);
    auto g = compile(r->build(), byte_vocab());
    EXPECT_TRUE(full_match(g, c.yes)) << c.body;
    EXPECT_FALSE(full_match(g, c.no)) << c.body;
  }
  // Equal constraints, equal keys (the schema's property order is part of it).
  EXPECT_EQ(from(R"({"guided_json":{"type":"object","properties":{"a":{},"b":{}}}})")->key,
            from(R"({"structured_outputs":{"json":{"type":"object","properties":{"a":{},"b":{}}}}})")->key);
  EXPECT_NE(from(R"({"guided_json":{"type":"object","properties":{"a":{},"b":{}}}})")->key,
            from(R"({"guided_json":{"type":"object","properties":{"b":{},"a":{}}}})")->key);
}

TEST(RequestConstraint, ErrorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"response_format":{"type":"xml"}})", "response_format: type \"xml\""},
      {R"({"response_format":{"type":"json_schema","json_schema":{"name":"x"}}})", "json_schema.schema is required"},
      {R"({"response_format":{"type":"json_object"},"guided_regex":"a"})", "guided_regex: conflicts with response_format"},
      {R"({"structured_outputs":{"regex":"a","choice":["b"]}})", "give only one"},
      {R"({"structured_outputs":{"structural_tag":"[1"}})", "structured_outputs.structural_tag: is not valid JSON"},
      {R"({"structured_outputs":{"structural_tag":"[1]"}})", "structured_outputs.structural_tag: must be"},
      {R"({"structured_outputs":{"grammar":"root ::= \"a\"","regex":"a"}})", "give only one"},
      {R"({"structured_outputs":{"jsn":{}}})", "structured_outputs.jsn: is not a known field"},
      {R"({"guided_grammar":""})", "guided_grammar: must be a non-empty string"},
      {R"({"grammar":["root ::= x"]})", "grammar: must be a non-empty string"},
      {R"({"guided_choice":[]})", "guided_choice: must be a non-empty array"},
      {R"({"guided_regex":5})", "guided_regex: must be a string"},
      {R"({"guided_json":"{bad"})", "guided_json: json_schema is not valid JSON"},
      {R"({"guided_json":[1]})", "guided_json: the schema must be a JSON object"},
  };
  for (auto& [body, what] : cases) {
    try {
      from(body);
      ADD_FAILURE() << "accepted " << body;
    } catch (const ConstraintError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << body << ": " << e.what();
    }
  }
  // Grammar text problems surface when the grammar is built, with the line.
  auto g = from(R"({"structured_outputs":{"grammar":"root ::= \"a\"\nb ::= c"}})");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->param, "structured_outputs.grammar");
  try {
    (void)g->build();
    ADD_FAILURE() << "an undefined rule compiled";
  } catch (const ConstraintError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2: rule 'c' is used but never defined"), std::string::npos) << e.what();
  }
  // Schema problems surface when the grammar is built (and the server caches the result).
  auto r = from(R"({"guided_json":{"type":"integer","multipleOf":2}})");
  ASSERT_TRUE(r);
  EXPECT_THROW(r->build(), ConstraintError);
}

}  // namespace
}  // namespace nanovllm::server
