// Request fields beyond plain sampling: output constraints (response_format, structured_outputs,
// guided_*), tools + tool_choice, n, echo. Each lands in SamplingParams / GenerationRequest, and
// every bad form is a 400 naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace nanovllm::server {
namespace {

const char* kMsgs = R"("messages":[{"role":"user","content":"x"}])";

GenerationRequest chat(const std::string& rest) {
  return parse_chat_request(std::string("{") + kMsgs + "," + rest + "}");
}

ApiError chat_error(const std::string& rest) {
  try {
    chat(rest);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted " << rest;
  return ApiError(0, "", "");
}

TEST(RequestFeatures, ResponseFormatKeepsSchemaPropertyOrder) {
  auto r = chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,
      "schema":{"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"string"}}}}})");
  const auto& so = r.params.structured_outputs;
  EXPECT_EQ(r.constraint_param, "response_format.json_schema.schema");
  // The order written, not nlohmann::json's sorted order: the model is made to write "zeta" first.
  EXPECT_LT(so.json.find("zeta"), so.json.find("alpha")) << so.json;
  EXPECT_TRUE(so.regex.empty() && so.choice.empty() && !so.json_object && so.tools.empty());
  EXPECT_TRUE(
      chat(R"("response_format":{"type":"json_object"})").params.structured_outputs.json_object);
  EXPECT_TRUE(chat(R"("response_format":{"type":"text"})").params.structured_outputs.empty());
}

TEST(RequestFeatures, VllmConstraintNames) {
  EXPECT_EQ(chat(R"("guided_regex":"a+")").params.structured_outputs.regex, "a+");
  EXPECT_EQ(chat(R"("guided_choice":["y","n"])").params.structured_outputs.choice,
            (std::vector<std::string>{"y", "n"}));
  EXPECT_NE(
      chat(R"("guided_json":{"type":"boolean"})").params.structured_outputs.json.find("boolean"),
      std::string::npos);
  auto so = chat(R"("structured_outputs":{"regex":"\\d+","disable_any_whitespace":true})")
                .params.structured_outputs;
  EXPECT_EQ(so.regex, "\\d+");
  EXPECT_TRUE(so.disable_any_whitespace);
  auto c = parse_completion_request(R"({"prompt":"p","structured_outputs":{"choice":["a"]}})");
  EXPECT_EQ(c.params.structured_outputs.choice.size(), 1u);
}

TEST(RequestFeatures, ToolChoiceModes) {
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])";
  auto none = chat(tools + R"(,"tool_choice":"none")");
  EXPECT_FALSE(none.parse_tool_calls);
  EXPECT_FALSE(none.template_kwargs.contains("tools"));
  auto autom = chat(tools);  // default auto: tools in the template, output parsed, unconstrained
  EXPECT_TRUE(autom.parse_tool_calls);
  EXPECT_TRUE(autom.template_kwargs.contains("tools"));
  EXPECT_TRUE(autom.params.structured_outputs.empty());
  auto req = chat(tools + R"(,"tool_choice":"required")");
  EXPECT_TRUE(req.parse_tool_calls);
  EXPECT_NE(req.params.structured_outputs.tools.find("\"f\""), std::string::npos);
  EXPECT_EQ(req.params.structured_outputs.tool_name, "");
  auto named = chat(tools + R"(,"tool_choice":{"type":"function","function":{"name":"f"}})");
  EXPECT_EQ(named.params.structured_outputs.tool_name, "f");
  EXPECT_EQ(named.constraint_param, "tool_choice");
}

TEST(RequestFeatures, NAndEcho) {
  EXPECT_EQ(chat(R"("n":3)").params.n, 3);
  EXPECT_EQ(chat(R"("n":4,"best_of":4)").params.n, 4);
  // best_of > n: the engine samples best_of, n come back, logprobs computed for the ranking.
  auto bo = chat(R"("n":2,"best_of":5)");
  EXPECT_EQ(bo.params.n, 5);
  EXPECT_EQ(bo.num_returned, 2);
  EXPECT_EQ(bo.params.logprobs, 0);
  EXPECT_FALSE(bo.logprobs);
  auto e = parse_completion_request(R"({"prompt":"p","echo":true})");
  EXPECT_TRUE(e.echo);
  EXPECT_NO_THROW(
      parse_completion_request(R"({"prompt":"p","suffix":""})"));  // empty: nothing to insert
}

TEST(RequestFeatures, ErrorsNameTheField) {
  const std::string tools = R"("tools":[{"type":"function","function":{"name":"f"}}])";
  const std::pair<std::string, std::string> cases[] = {
      {R"("response_format":{"type":"xml"})", "response_format"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"x"}})", "response_format"},
      {R"("guided_grammar":5)", "guided_grammar"},
      {R"("grammar":"")", "grammar"},
      {R"("guided_regex":5)", "guided_regex"},
      {R"("guided_choice":[])", "guided_choice"},
      {R"("structured_outputs":{"structural_tag":"x"})", "structured_outputs"},
      {R"("grammar":"root ::= \"a\"","guided_regex":"a")", "grammar"},
      {R"("response_format":{"type":"json_object"},"guided_regex":"a")", "guided_regex"},
      {R"("tool_choice":"required")", "tool_choice"},  // without tools
      {R"("tool_choice":"sometimes",)" + tools, "tool_choice"},
      {R"("tool_choice":{"type":"function"},)" + tools, "tool_choice"},
      {R"("tool_choice":"required","guided_regex":"a",)" + tools, "tool_choice"},
      {R"("tools":[],"tool_choice":"required")", "tools"},
      {R"("tools":[1])", "tools"},
  };
  for (const auto& [rest, param] : cases) {
    ApiError e = chat_error(rest);
    EXPECT_EQ(e.status, 400) << rest;
    EXPECT_EQ(e.param, param) << rest << " -> " << e.what();
    EXPECT_EQ(std::string(e.what()).find(".cc:"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nanovllm::server
