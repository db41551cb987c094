#include "server/anthropic_request.h"

#include "server/api_translate.h"

namespace nanovllm::server {
namespace {

// Text of a string or a list of {"type": "text", "text"} blocks (system, tool_result content).
std::string text_blocks(const ojson& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) throw field_type_error(where, "a string or a list of text blocks");
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const ojson& b = v[i];
    if (!b.is_object()) throw field_type_error(idx(where, i), "a content block object");
    const std::string type = string_field(b, "type", idx(where, i) + ".type");
    if (type != "text") throw unsupported("content block type '" + type + "' in " + where, where);
    if (!text.empty()) text += "\n";
    text += string_field(b, "text", idx(where, i) + ".text");
  }
  return text;
}

// One Anthropic message -> chat messages appended to `out`.
void translate_message(const ojson& m, size_t mi, ojson& out) {
  const std::string where = idx("messages", mi);
  if (!m.is_object()) throw field_type_error(where, "a message object");
  const std::string role = string_field(m, "role", where + ".role");
  if (role != "user" && role != "assistant")
    throw bad_request("'" + where + ".role' must be \"user\" or \"assistant\", got \"" + role + "\"", "messages");
  const ojson* content = opt_field(m, "content");
  if (!content) throw bad_request("'" + where + ".content' is required", "messages", "missing_parameter");
  if (content->is_string()) {
    out.push_back(ojson{{"role", role}, {"content", content->get<std::string>()}});
    return;
  }
  if (!content->is_array()) throw field_type_error(where + ".content", "a string or a list of content blocks");
  std::string text, thinking;
  ojson calls = ojson::array();
  for (size_t bi = 0; bi < content->size(); ++bi) {
    const ojson& b = (*content)[bi];
    const std::string bw = idx(where + ".content", bi);
    if (!b.is_object()) throw field_type_error(bw, "a content block object");
    const std::string type = string_field(b, "type", bw + ".type");
    if (type == "text") {
      if (!text.empty()) text += "\n";
      text += string_field(b, "text", bw + ".text");
    } else if (type == "thinking" && role == "assistant") {
      thinking += string_field(b, "thinking", bw + ".thinking");
    } else if (type == "redacted_thinking" && role == "assistant") {
      // Encrypted by another provider: nothing this model can read.
    } else if (type == "tool_use" && role == "assistant") {
      const ojson* input = opt_field(b, "input");
      if (input && !input->is_object()) throw field_type_error(bw + ".input", "an object");
      calls.push_back(ojson{{"id", string_field(b, "id", bw + ".id")},
                            {"type", "function"},
                            {"function", {{"name", string_field(b, "name", bw + ".name")},
                                          {"arguments", input ? input->dump() : "{}"}}}});
    } else if (type == "tool_result" && role == "user") {
      // Results answer the assistant's calls: each is a tool message, before the user's text.
      std::string result;
      if (const ojson* c = opt_field(b, "content")) result = text_blocks(*c, bw + ".content");
      if (const ojson* err = opt_field(b, "is_error")) {
        if (!err->is_boolean()) throw field_type_error(bw + ".is_error", "a boolean");
        if (err->get<bool>()) result = "Error: " + result;
      }
      out.push_back(ojson{{"role", "tool"},
                          {"tool_call_id", string_field(b, "tool_use_id", bw + ".tool_use_id")},
                          {"content", result}});
    } else {
      throw unsupported("content block type '" + type + "' in a " + role + " message", "messages");
    }
  }
  if (role == "user") {
    if (!text.empty() || out.empty() || out.back()["role"] != "tool")
      out.push_back(ojson{{"role", "user"}, {"content", text}});
    return;
  }
  ojson msg{{"role", "assistant"}, {"content", text}};
  if (!thinking.empty()) msg["reasoning_content"] = thinking;
  if (!calls.empty()) msg["tool_calls"] = calls;
  out.push_back(std::move(msg));
}

ojson translate_tools(const ojson& tools) {
  if (!tools.is_array()) throw field_type_error("tools", "a list of tool objects");
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string w = idx("tools", i);
    if (!t.is_object()) throw field_type_error(w, "a tool object");
    const std::string type = string_field(t, "type", w + ".type", "custom");
    if (type != "custom") throw unsupported("tool type '" + type + "' (server tools)", "tools");
    ojson fn{{"name", string_field(t, "name", w + ".name")}};
    if (fn["name"].get<std::string>().empty()) throw bad_request("'" + w + ".name' must not be empty", "tools");
    if (const ojson* d = opt_field(t, "description")) {
      if (!d->is_string()) throw field_type_error(w + ".description", "a string");
      fn["description"] = *d;
    }
    const ojson* schema = opt_field(t, "input_schema");
    if (!schema) throw bad_request("'" + w + ".input_schema' is required", "tools", "missing_parameter");
    if (!schema->is_object()) throw field_type_error(w + ".input_schema", "a JSON schema object");
    fn["parameters"] = *schema;
    out.push_back(ojson{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

ojson translate_tool_choice(const ojson& tc) {
  if (!tc.is_object()) throw field_type_error("tool_choice", "an object");
  const std::string type = string_field(tc, "type", "tool_choice.type");
  if (const ojson* d = opt_field(tc, "disable_parallel_tool_use"); d && !d->is_boolean())
    throw field_type_error("tool_choice.disable_parallel_tool_use", "a boolean");
  if (type == "auto" || type == "none") return type;
  if (type == "any") return "required";
  if (type == "tool")
    return ojson{{"type", "function"}, {"function", {{"name", string_field(tc, "name", "tool_choice.name")}}}};
  throw bad_request("'tool_choice.type' must be \"auto\", \"any\", \"tool\" or \"none\", got \"" + type + "\"",
                    "tool_choice");
}

MessagesRequest translate(const ojson& b, size_t max_json_depth, bool count_only) {
  MessagesRequest r;
  ojson chat = ojson::object();
  if (const ojson* m = opt_field(b, "model")) chat["model"] = *m;
  ojson messages = ojson::array();
  if (const ojson* s = opt_field(b, "system")) {
    const std::string sys = text_blocks(*s, "system");
    if (!sys.empty()) messages.push_back(ojson{{"role", "system"}, {"content", sys}});
  }
  const ojson* msgs = opt_field(b, "messages");
  if (!msgs) throw bad_request("'messages' is required", "messages", "missing_parameter");
  if (!msgs->is_array()) throw field_type_error("messages", "a list of message objects");
  if (msgs->empty()) throw bad_request("'messages' must not be empty", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) translate_message((*msgs)[i], i, messages);
  chat["messages"] = std::move(messages);
  if (const ojson* t = opt_field(b, "tools")) chat["tools"] = translate_tools(*t);
  if (const ojson* tc = opt_field(b, "tool_choice")) chat["tool_choice"] = translate_tool_choice(*tc);
  if (const ojson* th = opt_field(b, "thinking")) {
    if (!th->is_object()) throw field_type_error("thinking", "an object");
    const std::string type = string_field(*th, "type", "thinking.type");
    if (type == "enabled" || type == "adaptive") r.thinking = true;
    else if (type != "disabled")
      throw bad_request("'thinking.type' must be \"enabled\", \"adaptive\" or \"disabled\", got \"" + type + "\"",
                        "thinking");
    if (const ojson* bt = opt_field(*th, "budget_tokens")) {
      if (!bt->is_number_integer() || bt->get<int64_t>() < 0)
        throw bad_request("'thinking.budget_tokens' must be a non-negative integer", "thinking");
      if (r.thinking) chat["thinking_budget"] = *bt;  // at most this many thinking tokens
    }
  }
  chat["chat_template_kwargs"] = ojson{{"enable_thinking", r.thinking}};
  if (const ojson* mcp = opt_field(b, "mcp_servers"); mcp && !(mcp->is_array() && mcp->empty()))
    throw unsupported("'mcp_servers'", "mcp_servers");
  if (opt_field(b, "container")) throw unsupported("'container'", "container");
  if (const ojson* md = opt_field(b, "metadata"); md && !md->is_object()) throw field_type_error("metadata", "an object");
  if (!count_only) {
    const ojson* mt = opt_field(b, "max_tokens");
    if (!mt) throw bad_request("'max_tokens' is required", "max_tokens", "missing_parameter");
    if (!mt->is_number_integer() || mt->get<int64_t>() < 1)
      throw bad_request("'max_tokens' must be a positive integer", "max_tokens");
    chat["max_tokens"] = *mt;
    if (const ojson* st = opt_field(b, "stop_sequences")) {
      if (!st->is_array()) throw field_type_error("stop_sequences", "a list of strings");
      for (const auto& s : *st)
        if (!s.is_string() || s.get<std::string>().empty())
          throw bad_request("'stop_sequences' must be a list of non-empty strings", "stop_sequences");
      if (!st->empty()) chat["stop"] = *st;
    }
    if (const ojson* s = opt_field(b, "stream")) chat["stream"] = *s;
    copy_sampling_fields(b, chat);
  }
  r.g = parse_translated_chat(chat, max_json_depth, {{"stop", "stop_sequences"}, {"max_completion_tokens", "max_tokens"}});
  r.g.soft_thinking_budget = chat.contains("thinking_budget");
  return r;
}

}  // namespace

MessagesRequest parse_messages_request(const std::string& body, size_t max_json_depth) {
  return translate(parse_ordered_body(body, max_json_depth), max_json_depth, false);
}

MessagesRequest parse_count_tokens_request(const std::string& body, size_t max_json_depth) {
  return translate(parse_ordered_body(body, max_json_depth), max_json_depth, true);
}

nlohmann::json anthropic_error_json(const ApiError& e) {
  std::string type;
  switch (e.status) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: type = "overloaded_error"; break;
    default: type = e.status >= 500 ? "api_error" : "invalid_request_error"; break;
  }
  return nlohmann::json{{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

}  // namespace nanovllm::server
