#include "server/responses_request.h"

#include "server/api_translate.h"
#include "server/response_store.h"

namespace nanovllm::server {
namespace {

using nlohmann::json;

// A message's content: a string or a list of text parts (input_text, output_text, text, refusal).
std::string content_text(const ojson& c, const std::string& where) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw field_type_error(where, "a string or a list of content parts");
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const ojson& p = c[i];
    const std::string pw = idx(where, i);
    if (!p.is_object()) throw field_type_error(pw, "a content part object");
    const std::string type = string_field(p, "type", pw + ".type");
    std::string piece;
    if (type == "input_text" || type == "output_text" || type == "text") piece = string_field(p, "text", pw + ".text");
    else if (type == "refusal") piece = string_field(p, "refusal", pw + ".refusal");
    else throw unsupported("content part type '" + type + "'", "input");
    if (!text.empty()) text += "\n";
    text += piece;
  }
  return text;
}

// Appends the chat form of input items to `msgs` (which may already hold a previous
// conversation). Consecutive function_call items share one assistant message, as a model's
// parallel calls do; a reasoning item goes with the assistant message that follows it.
void translate_items(const ojson& input, ojson& msgs) {
  std::string reasoning;  // from a reasoning item, for the next assistant message
  auto assistant = [&](ojson m) {
    if (!reasoning.empty()) m["reasoning_content"] = reasoning;
    reasoning.clear();
    msgs.push_back(std::move(m));
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const ojson& it = input[i];
    const std::string w = idx("input", i);
    if (!it.is_object()) throw field_type_error(w, "an input item object");
    const std::string type = string_field(it, "type", w + ".type", "message");
    if (type == "message") {
      std::string role = string_field(it, "role", w + ".role");
      if (role == "developer") role = "system";
      if (role != "user" && role != "assistant" && role != "system")
        throw bad_request("'" + w + ".role' must be user, assistant, system or developer, got \"" + role + "\"", "input");
      const ojson* c = opt_field(it, "content");
      if (!c) throw bad_request("'" + w + ".content' is required", "input", "missing_parameter");
      ojson m{{"role", role}, {"content", content_text(*c, w + ".content")}};
      if (role == "assistant") assistant(std::move(m));
      else msgs.push_back(std::move(m));
    } else if (type == "function_call") {
      ojson call{{"id", string_field(it, "call_id", w + ".call_id")},
                 {"type", "function"},
                 {"function", {{"name", string_field(it, "name", w + ".name")},
                               {"arguments", string_field(it, "arguments", w + ".arguments", "{}")}}}};
      if (reasoning.empty() && !msgs.empty() && msgs.back()["role"] == "assistant" && msgs.back().contains("tool_calls")) {
        msgs.back()["tool_calls"].push_back(std::move(call));
      } else {
        assistant(ojson{{"role", "assistant"}, {"content", ""}, {"tool_calls", ojson::array({std::move(call)})}});
      }
    } else if (type == "function_call_output") {
      const ojson* out = opt_field(it, "output");
      if (!out) throw bad_request("'" + w + ".output' is required", "input", "missing_parameter");
      msgs.push_back(ojson{{"role", "tool"},
                           {"tool_call_id", string_field(it, "call_id", w + ".call_id")},
                           {"content", content_text(*out, w + ".output")}});
    } else if (type == "reasoning") {
      // The text of a reasoning item: its reasoning_text content, else its summary.
      std::string text;
      for (const char* key : {"content", "summary"}) {
        const ojson* parts = opt_field(it, key);
        if (!parts) continue;
        if (!parts->is_array()) throw field_type_error(w + "." + key, "a list");
        for (const auto& p : *parts)
          if (p.is_object() && p.contains("text") && p["text"].is_string()) text += p["text"].get<std::string>();
        if (!text.empty()) break;
      }
      reasoning += text;
    } else {
      throw unsupported("input item type '" + type + "'", "input");
    }
  }
}

ojson translate_tools(const ojson& tools) {
  if (!tools.is_array()) throw field_type_error("tools", "a list of tool objects");
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string w = idx("tools", i);
    if (!t.is_object()) throw field_type_error(w, "a tool object");
    const std::string type = string_field(t, "type", w + ".type");
    if (type != "function") throw unsupported("tool type '" + type + "' (hosted tools)", "tools");
    ojson fn{{"name", string_field(t, "name", w + ".name")}};
    if (const ojson* d = opt_field(t, "description")) fn["description"] = *d;
    if (const ojson* p = opt_field(t, "parameters")) fn["parameters"] = *p;
    if (const ojson* s = opt_field(t, "strict")) fn["strict"] = *s;
    out.push_back(ojson{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

ojson translate_tool_choice(const ojson& tc) {
  if (tc.is_string()) return tc;  // none | auto | required (checked by the chat parser)
  if (tc.is_object() && string_field(tc, "type", "tool_choice.type") == "function")
    return ojson{{"type", "function"}, {"function", {{"name", string_field(tc, "name", "tool_choice.name")}}}};
  throw bad_request("'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"name\": ...}",
                    "tool_choice");
}

// text.format -> response_format.
ojson translate_format(const ojson& text) {
  if (!text.is_object()) throw field_type_error("text", "an object");
  const ojson* f = opt_field(text, "format");
  if (!f) return nullptr;
  if (!f->is_object()) throw field_type_error("text.format", "an object");
  const std::string type = string_field(*f, "type", "text.format.type");
  if (type == "text") return nullptr;
  if (type == "json_object") return ojson{{"type", "json_object"}};
  if (type != "json_schema")
    throw bad_request("'text.format.type' must be \"text\", \"json_object\" or \"json_schema\", got \"" + type + "\"",
                      "text");
  ojson js{{"name", string_field(*f, "name", "text.format.name", "response")}};
  const ojson* schema = opt_field(*f, "schema");
  if (!schema) throw bad_request("'text.format.schema' is required", "text", "missing_parameter");
  js["schema"] = *schema;
  if (const ojson* s = opt_field(*f, "strict")) js["strict"] = *s;
  return ojson{{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

bool bool_field(const ojson& b, const char* key, bool def) {
  const ojson* v = opt_field(b, key);
  if (!v) return def;
  if (!v->is_boolean()) throw field_type_error(key, "a boolean");
  return v->get<bool>();
}

}  // namespace

ResponsesRequest parse_responses_request(const std::string& body, size_t max_json_depth, const ResponseStore& store) {
  const ojson b = parse_ordered_body(body, max_json_depth);
  ResponsesRequest r;
  ojson chat = ojson::object();
  if (const ojson* m = opt_field(b, "model")) chat["model"] = *m;
  for (const char* k : {"conversation", "prompt", "item_reference"})
    if (opt_field(b, k)) throw unsupported("'" + std::string(k) + "'", k);

  ojson conv = ojson::array();
  const std::string prev = string_field(b, "previous_response_id", "previous_response_id");
  if (!prev.empty()) {
    std::optional<json> c = store.conversation(prev);
    if (!c)
      throw bad_request("Previous response with id '" + prev + "' not found (responses are kept in memory, the last " +
                            std::to_string(store.capacity()) + "; store = false keeps none)",
                        "previous_response_id", "previous_response_not_found");
    conv = ojson::parse(c->dump());
  }
  const ojson* input = opt_field(b, "input");
  if (!input) throw bad_request("'input' is required", "input", "missing_parameter");
  if (input->is_string()) conv.push_back(ojson{{"role", "user"}, {"content", *input}});
  else if (input->is_array()) translate_items(*input, conv);
  else throw field_type_error("input", "a string or a list of input items");
  if (conv.empty()) throw bad_request("'input' must not be empty", "input");

  const std::string instructions = string_field(b, "instructions", "instructions");
  ojson messages = ojson::array();
  if (!instructions.empty()) messages.push_back(ojson{{"role", "system"}, {"content", instructions}});
  for (const auto& m : conv) messages.push_back(m);
  chat["messages"] = std::move(messages);

  if (const ojson* t = opt_field(b, "tools"); t && !(t->is_array() && t->empty())) chat["tools"] = translate_tools(*t);
  if (const ojson* tc = opt_field(b, "tool_choice")) chat["tool_choice"] = translate_tool_choice(*tc);
  if (const ojson* t = opt_field(b, "text")) {
    ojson rf = translate_format(*t);
    if (!rf.is_null()) chat["response_format"] = std::move(rf);
  }
  if (const ojson* rz = opt_field(b, "reasoning")) {
    if (!rz->is_object()) throw field_type_error("reasoning", "an object");
    const std::string effort = string_field(*rz, "effort", "reasoning.effort");
    if (!effort.empty() && effort != "none" && effort != "minimal" && effort != "low" && effort != "medium" &&
        effort != "high" && effort != "xhigh")
      throw bad_request("'reasoning.effort' must be none, minimal, low, medium, high or xhigh, got \"" + effort + "\"",
                        "reasoning");
    if (!effort.empty()) chat["reasoning_effort"] = effort;  // the chat route's mapping
  }
  if (const ojson* mt = opt_field(b, "max_output_tokens")) chat["max_tokens"] = *mt;
  if (const ojson* s = opt_field(b, "stream")) chat["stream"] = *s;
  if (const ojson* tl = opt_field(b, "top_logprobs"); tl && !(tl->is_number_integer() && tl->get<int64_t>() == 0))
    throw unsupported("'top_logprobs'", "top_logprobs");
  copy_sampling_fields(b, chat);
  if (const ojson* md = opt_field(b, "metadata"); md && !md->is_object()) throw field_type_error("metadata", "an object");
  r.store = bool_field(b, "store", true);
  r.background = bool_field(b, "background", false);
  if (r.background && !r.store)
    throw bad_request("'background' needs 'store' = true (a background response is fetched from the store)", "background");
  const bool parallel = bool_field(b, "parallel_tool_calls", true);
  const std::string truncation = string_field(b, "truncation", "truncation", "disabled");
  if (truncation != "disabled" && truncation != "auto")
    throw bad_request("'truncation' must be \"disabled\" or \"auto\"", "truncation");

  r.g = parse_translated_chat(chat, max_json_depth, {{"max_tokens", "max_output_tokens"}, {"messages", "input"},
                                                     {"response_format", "text"}});
  if (r.g.params.n != 1) throw bad_request("'n' is not a Responses API field", "n");
  r.conversation = json::parse(conv.dump());

  // What the response object echoes (OpenAI's field set; absent -> null or the default).
  auto echo = [&](const char* key, json def) {
    const ojson* v = opt_field(b, key);
    r.echo[key] = v ? json::parse(v->dump()) : std::move(def);
  };
  r.echo["instructions"] = instructions.empty() ? json(nullptr) : json(instructions);
  echo("max_output_tokens", nullptr);
  echo("metadata", json::object());
  r.echo["parallel_tool_calls"] = parallel;
  r.echo["previous_response_id"] = prev.empty() ? json(nullptr) : json(prev);
  echo("reasoning", json{{"effort", nullptr}, {"summary", nullptr}});
  r.echo["store"] = r.store;
  r.echo["background"] = r.background;
  echo("temperature", 1.0);
  echo("top_p", 1.0);
  echo("text", json{{"format", {{"type", "text"}}}});
  echo("tool_choice", "auto");
  echo("tools", json::array());
  r.echo["truncation"] = truncation;
  echo("user", nullptr);
  return r;
}

}  // namespace nanovllm::server
