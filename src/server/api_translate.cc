#include "server/api_translate.h"

#include "server/api_writer.h"

#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm::server {

const ojson* opt_field(const ojson& b, const char* key) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return nullptr;
  return &*it;
}

ApiError field_type_error(const std::string& param, const std::string& want) {
  std::string top = param.substr(0, param.find_first_of(".["));
  return bad_request("'" + param + "' must be " + want, top, "invalid_type");
}

std::string string_field(const ojson& b, const char* key, const std::string& param, const std::string& def) {
  const ojson* v = opt_field(b, key);
  if (!v) return def;
  if (!v->is_string()) throw field_type_error(param, "a string");
  return v->get<std::string>();
}

std::string idx(const std::string& base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

ApiError unsupported(const std::string& what, const std::string& param) {
  return bad_request(what + " is not supported by this server", param, "unsupported_parameter");
}

ojson parse_ordered_body(const std::string& body, size_t max_json_depth) {
  return parse_request_body_as<ojson>(body, max_json_depth);
}

void copy_sampling_fields(const ojson& from, ojson& chat) {
  static const char* kSame[] = {"temperature", "top_p",  "top_k",           "min_p",
                                "seed",        "presence_penalty", "frequency_penalty",
                                "repetition_penalty", "min_tokens", "ignore_eos", "logit_bias",
                                "stop_token_ids", "skip_special_tokens", "thinking_budget"};
  for (const char* k : kSame)
    if (const ojson* v = opt_field(from, k)) chat[k] = *v;
}

GenerationRequest parse_translated_chat(const ojson& chat, size_t max_json_depth,
                                        const std::vector<std::pair<std::string, std::string>>& rename) {
  try {
    // The translation nests tools and messages a few levels deeper than the client wrote them.
    return parse_chat_request(chat.dump(), max_json_depth + 4);
  } catch (ApiError& e) {
    for (const auto& [from, to] : rename) {
      if (e.param != from) continue;
      e.param = to;
      std::string msg = e.what();
      const std::string quoted = "'" + from + "'";
      if (msg.rfind(quoted, 0) == 0) msg = "'" + to + "'" + msg.substr(quoted.size());
      else if (msg.rfind(from + " ", 0) == 0) msg = to + msg.substr(from.size());
      throw ApiError(e.status, msg, e.type, e.param, e.code);
    }
    throw;
  }
}

std::string sse_named_event(const std::string& type, const nlohmann::json& data) {
  return "event: " + type + "\ndata: " + dump_json(data) + "\n\n";
}

}  // namespace nanovllm::server
