#include "server/request_features.h"

#include "server/api_error.h"
#include "server/structured_request.h"
#include "structured/grammar.h"
#include "util/json_bounded.h"

namespace nanovllm::server {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

const json* field(const json& b, const char* key) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return nullptr;
  return &*it;
}

int int_field(const json& b, const char* key, int def) {
  const json* v = field(b, key);
  if (!v) return def;
  if (!v->is_number_integer())
    throw bad_request(std::string("'") + key + "' must be an integer", key, "invalid_type");
  const int64_t x = v->get<int64_t>();
  if (x < 1 || x > 64)
    throw bad_request(std::string("'") + key + "' must be in [1, 64], got " + v->dump(), key);
  return int(x);
}

// The tool_choice value: "none" | "auto" | "required" | {"type": "function", "function": {"name"}}.
struct ToolChoice {
  std::string mode = "auto";  // none | auto | required | named
  std::string name;
};

ToolChoice parse_tool_choice(const json* tc) {
  ToolChoice c;
  if (!tc) return c;
  if (tc->is_string()) {
    c.mode = tc->get<std::string>();
    if (c.mode != "none" && c.mode != "auto" && c.mode != "required")
      throw bad_request(
          "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
          "\"function\": {\"name\": ...}}, got \"" +
              c.mode + "\"",
          "tool_choice");
    return c;
  }
  if (tc->is_object() && tc->contains("function") && (*tc)["function"].is_object() &&
      (*tc)["function"].contains("name") && (*tc)["function"]["name"].is_string()) {
    c.mode = "named";
    c.name = (*tc)["function"]["name"].get<std::string>();
    return c;
  }
  throw bad_request(
      "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
      "\"function\": {\"name\": ...}}",
      "tool_choice", "invalid_type");
}

}  // namespace

void parse_n(const json& b, GenerationRequest& r) {
  const int n = int_field(b, "n", 1);
  const int best_of = int_field(b, "best_of", n);
  if (best_of < n)
    throw bad_request("'best_of' must be >= 'n' (" + std::to_string(n) + "), got " + std::to_string(best_of), "best_of");
  // best_of > n: sample best_of, return the n with the highest cumulative logprob (vLLM / the
  // legacy OpenAI API); the sampled tokens' logprobs are needed for the ranking.
  r.num_returned = n;
  r.params.n = best_of;
  if (best_of > n) {
    if (const json* s = field(b, "stream"); s && s->is_boolean() && s->get<bool>())
      throw bad_request("'best_of' > 'n' is not supported with stream = true (the best are known at the end)",
                        "best_of");
  }
}

void parse_constraints(const json& b, const std::string& body, size_t max_json_depth,
                       GenerationRequest& r) {
  static const char* kKeys[] = {"response_format", "structured_outputs", "guided_json",
                                "guided_regex",    "guided_choice",      "guided_grammar",
                                "grammar",         "tools",              "tool_choice"};
  bool any = false;
  for (const char* k : kKeys) any = any || field(b, k) != nullptr;
  if (!any) return;
  // Again with the keys in order: a schema's properties are generated in the order written.
  JsonLimits limits;
  limits.max_depth = max_json_depth;
  const ojson ob = parse_ordered_json(body, "request body", limits);
  try {
    std::string param;
    if (auto so = request_structured_outputs(ob, &param)) {
      r.params.structured_outputs = std::move(*so);
      r.constraint_param = param;
    }
  } catch (const structured::ConstraintError& e) {
    const std::string msg = client_message(e.what());
    throw bad_request(msg, msg.substr(0, msg.find_first_of(".:")));
  }

  const json* tools = field(b, "tools");
  const ToolChoice choice = parse_tool_choice(field(b, "tool_choice"));
  if (!tools) {
    if (choice.mode == "required" || choice.mode == "named")
      throw bad_request("'tool_choice' \"" + choice.mode + "\" needs 'tools'", "tool_choice");
    return;
  }
  if (!r.chat) throw bad_request("'tools' is only supported by /v1/chat/completions", "tools");
  if (!tools->is_array())
    throw bad_request("'tools' must be a list of tool objects", "tools", "invalid_type");
  for (const auto& t : *tools)
    if (!t.is_object())
      throw bad_request("'tools' must be a list of tool objects", "tools", "invalid_type");
  if (choice.mode == "none") return;  // the template does not see them, the output is not parsed
  r.template_kwargs["tools"] = *tools;
  r.parse_tool_calls = true;
  if (choice.mode == "auto") return;
  if (!r.params.structured_outputs.empty())
    throw bad_request("'tool_choice' \"" + choice.mode + "\" conflicts with " + r.constraint_param +
                          ": give one output constraint",
                      "tool_choice");
  if (tools->empty())
    throw bad_request("'tools' must not be empty with tool_choice \"" + choice.mode + "\"",
                      "tools");
  r.params.structured_outputs.tools = ob["tools"].dump();
  r.params.structured_outputs.tool_name = choice.name;
  r.constraint_param = "tool_choice";
}

void parse_echo_suffix(const json& b, GenerationRequest& r) {
  if (const json* e = field(b, "echo")) {
    if (!e->is_boolean()) throw bad_request("'echo' must be a boolean", "echo", "invalid_type");
    r.echo = e->get<bool>();
  }
  if (r.echo && r.logprobs)
    throw bad_request("'echo' with 'logprobs' is not supported (prompt logprobs are not computed)",
                      "echo");
  if (const json* s = field(b, "suffix")) {
    if (!s->is_string()) throw bad_request("'suffix' must be a string", "suffix", "invalid_type");
    if (!s->get<std::string>().empty())
      throw bad_request(
          "'suffix' (fill-in-the-middle insertion) is not supported by this server; send the "
          "whole prompt without 'suffix'",
          "suffix", "unsupported_parameter");
  }
}

}  // namespace nanovllm::server
