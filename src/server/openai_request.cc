#include "server/openai_request.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <optional>
#include <string_view>
#include <type_traits>

#include "server/api_error.h"
#include "server/request_features.h"
#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm::server {
namespace {

using nlohmann::json;

// A field is "absent" when missing or null (OpenAI clients send explicit nulls).
const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

ApiError type_error(const char* key, const char* want) {
  return bad_request(std::string("'") + key + "' must be " + want, key, "invalid_type");
}

bool get_bool(const json& body, const char* key, bool def) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_boolean()) throw type_error(key, "a boolean");
  return v->get<bool>();
}

double get_number(const json& body, const char* key, double def) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_number()) throw type_error(key, "a number");
  double d = v->get<double>();
  if (!std::isfinite(d)) throw bad_request(std::string("'") + key + "' must be finite", key);
  return d;
}

int64_t get_int64(const json& body, const char* key, int64_t def) {
  const json* v = field(body, key);
  if (!v) return def;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > uint64_t(INT64_MAX)) throw bad_request(std::string("'") + key + "' is too large", key);
    return int64_t(u);
  }
  if (!v->is_number_integer()) throw type_error(key, "an integer");
  return v->get<int64_t>();
}

int get_int(const json& body, const char* key, int def) {
  int64_t v = get_int64(body, key, def);
  if (v < INT_MIN || v > INT_MAX)
    throw bad_request(std::string("'") + key + "' is out of range: " + std::to_string(v), key);
  return int(v);
}

std::vector<int> get_token_ids(const json& arr, const char* key) {
  std::vector<int> ids;
  ids.reserve(arr.size());
  for (const auto& x : arr) {
    if (!x.is_number_integer()) throw type_error(key, "a list of integer token ids");
    int64_t v = x.get<int64_t>();
    if (v < 0 || v > INT_MAX)
      throw bad_request(std::string("'") + key + "' contains an invalid token id " + std::to_string(v), key);
    ids.push_back(int(v));
  }
  return ids;
}

// OpenAI's {"token id": bias}: keys are decimal token ids (JSON object keys are strings).
std::map<int, float> parse_logit_bias(const json& lb) {
  if (!lb.is_object()) throw type_error("logit_bias", "an object mapping token ids to numbers");
  std::map<int, float> out;
  for (const auto& [key, value] : lb.items()) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (...) {
      used = 0;
    }
    if (key.empty() || used != key.size() || id < 0 || id > INT_MAX || key[0] == '+' || key[0] == ' ')
      throw bad_request("'logit_bias' keys must be token ids (non-negative integers), got '" + key + "'",
                        "logit_bias");
    if (!value.is_number())
      throw bad_request("'logit_bias' value for token " + key + " must be a number", "logit_bias",
                        "invalid_type");
    out[int(id)] = value.get<float>();
  }
  return out;
}

// A sampling field from the request field of the same name (SamplingParams' names are vLLM's
// request fields), by its type; absent (or null) keeps the default.
void read_param(const json& b, const char* key, float& v) { v = float(get_number(b, key, v)); }
void read_param(const json& b, const char* key, int& v) { v = get_int(b, key, v); }
void read_param(const json& b, const char* key, bool& v) { v = get_bool(b, key, v); }
void read_param(const json& b, const char* key, std::optional<uint64_t>& v) {
  if (field(b, key)) v = uint64_t(get_int64(b, key, 0));
}
void read_param(const json& b, const char* key, std::vector<std::string>& v) {  // stop
  const json* s = field(b, key);
  if (!s) return;
  if (s->is_string()) {
    v.push_back(s->get<std::string>());
  } else if (s->is_array()) {
    for (const auto& x : *s) {
      if (!x.is_string()) throw type_error(key, "a string or a list of strings");
      v.push_back(x.get<std::string>());
    }
  } else {
    throw type_error(key, "a string or a list of strings");
  }
}
void read_param(const json& b, const char* key, std::vector<int>& v) {  // stop_token_ids
  const json* s = field(b, key);
  if (!s) return;
  if (!s->is_array()) throw type_error(key, "a list of integer token ids");
  v = get_token_ids(*s, key);
}
void read_param(const json& b, const char* key, std::map<int, float>& v) {  // logit_bias
  if (const json* lb = field(b, key)) v = parse_logit_bias(*lb);
}

// Sampling fields whose request form differs by endpoint (or has other names): read by
// parse_completion_request / parse_chat_request, parse_n and parse_constraints.
bool endpoint_specific(std::string_view name) {
  return name == "max_tokens" || name == "logprobs" || name == "n" || name == "structured_outputs";
}

// Fields shared by both endpoints: model, sampling, stop conditions, n, streaming.
void parse_common(const json& b, GenerationRequest& r) {
  if (const json* m = field(b, "model")) {
    if (!m->is_string()) throw type_error("model", "a string");
    r.model = m->get<std::string>();
  }
  // Every other sampling field, from the table (nanovllm/sampling_params.h). Ranges are checked
  // by SamplingParams::validate (validate_params), vocabulary ids by the engine.
  for_each_field<SamplingParams>([&](const auto& f) {
    using M = typename std::remove_cvref_t<decltype(f)>::Member;
    if constexpr (!std::is_same_v<M, StructuredOutputsParams>) {
      if (!endpoint_specific(f.name)) read_param(b, f.name.data(), r.params.*f.member);
    }
  });
  parse_n(b, r);
  r.stream = get_bool(b, "stream", false);
  if (const json* so = field(b, "stream_options")) {
    if (!so->is_object()) throw type_error("stream_options", "an object");
    if (!r.stream) throw bad_request("'stream_options' is only allowed with stream = true", "stream_options");
    r.include_usage = get_bool(*so, "include_usage", false);
    r.continuous_usage = get_bool(*so, "continuous_usage_stats", false);
  }
}

void set_max_tokens(const json& b, GenerationRequest& r, const char* key) {
  if (!field(b, key)) return;
  r.params.max_tokens = get_int(b, key, 0);
  r.max_tokens_set = true;
}

// SamplingParams::validate() names the parameter first ("top_p must be ..."): use that word.
void validate_params(const GenerationRequest& r) {
  try {
    r.params.validate();
  } catch (const Error& e) {
    // (The message is whole: nanovllm::Error carries no source-location suffix any more. Cutting
    // at the first " [" used to turn "min_p must be in [0, 1], got 2" into "min_p must be in".)
    const std::string msg = e.what();
    std::string param = msg.substr(0, msg.find(' '));
    for (char c : param)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) { param.clear(); break; }
    throw bad_request(msg, param);
  }
}

// best_of > n ranks completions by the sum of their sampled tokens' logprobs: the engine must
// report them (logprobs >= 0) whether or not the client asked (the response shows them only then).
void rank_needs_logprobs(GenerationRequest& r) {
  if (r.params.n > r.num_returned) r.params.logprobs = std::max(r.params.logprobs, 0);
  if (r.params.prompt_logprobs >= 0 && r.stream)
    throw bad_request("'prompt_logprobs' is not supported with stream = true", "prompt_logprobs");
}

// OpenAI's reasoning_effort on a reasoning model: none / minimal turn thinking off (the
// template's enable_thinking, unless chat_template_kwargs sets it), low / medium a thinking
// budget of 1024 / 4096 tokens (unless thinking_budget is given), high unlimited.
void parse_reasoning_effort(const json& b, GenerationRequest& r) {
  const json* e = field(b, "reasoning_effort");
  if (!e) return;
  if (!e->is_string()) throw type_error("reasoning_effort", "a string");
  const std::string v = e->get<std::string>();
  if (v == "none" || v == "minimal") {
    if (!r.template_kwargs.contains("enable_thinking")) r.template_kwargs["enable_thinking"] = false;
  } else if (v == "low" || v == "medium") {
    if (!field(b, "thinking_budget")) {
      r.params.thinking_budget = v == "low" ? 1024 : 4096;
      r.soft_thinking_budget = true;
    }
  } else if (v != "high" && v != "xhigh") {
    throw bad_request("'reasoning_effort' must be none, minimal, low, medium or high, got \"" + v + "\"",
                      "reasoning_effort");
  }
}

std::string content_to_text(const json& content, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw bad_request("'" + where + "' must be a string, null or a list of text parts", "messages", "invalid_type");
  std::string text;
  bool first = true;
  for (const auto& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw bad_request("'" + where + "' parts must be {\"type\": \"text\", \"text\": string}",
                        "messages", "invalid_type");
    if (!first) text += "\n";
    text += part["text"].get<std::string>();
    first = false;
  }
  return text;
}

}  // namespace

// Bounded parse (util/json_bounded.h): nesting is limited before anything recurses over it.
json parse_request_body(const std::string& body, size_t max_json_depth) {
  return parse_request_body_as<json>(body, max_json_depth);
}

template <class Json>
Json parse_request_body_as(const std::string& body, size_t max_json_depth) {
  Json j;
  try {
    JsonLimits limits;
    limits.max_depth = max_json_depth;
    if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) j = parse_ordered_json(body, "request body", limits);
    else j = parse_json(body, "request body", limits);
  } catch (const Error& e) {
    std::string msg = client_message(e.what());
    if (msg.find("nested deeper") != std::string::npos) msg += " (serve --max-json-depth)";
    throw bad_request(msg, "", "invalid_json");
  }
  if (!j.is_object()) throw bad_request("request body must be a JSON object", "", "invalid_json");
  return j;
}
template json parse_request_body_as<json>(const std::string&, size_t);
template nlohmann::ordered_json parse_request_body_as<nlohmann::ordered_json>(const std::string&, size_t);

GenerationRequest parse_completion_request(const std::string& body, size_t max_json_depth) {
  const json b = parse_request_body(body, max_json_depth);
  GenerationRequest r;
  r.chat = false;
  const json* pr = field(b, "prompt");
  if (!pr) throw bad_request("'prompt' is required", "prompt", "missing_parameter");
  if (pr->is_string()) {
    r.prompt = pr->get<std::string>();
  } else if (pr->is_array()) {
    if (pr->empty()) throw bad_request("'prompt' must not be empty", "prompt");
    const json& first = (*pr)[0];
    if (first.is_number_integer()) {
      r.prompt = get_token_ids(*pr, "prompt");
    } else if (first.is_string() || first.is_array()) {
      if (pr->size() != 1)
        throw bad_request("batched prompts are not supported: send one prompt per request", "prompt");
      if (first.is_string()) r.prompt = first.get<std::string>();
      else r.prompt = get_token_ids(first, "prompt");
    } else {
      throw type_error("prompt", "a string, a list of token ids, or a list with one of those");
    }
  } else {
    throw type_error("prompt", "a string, a list of token ids, or a list with one of those");
  }
  parse_common(b, r);
  r.params.max_tokens = 16;  // OpenAI's default for completions
  r.max_tokens_set = true;
  set_max_tokens(b, r, "max_tokens");
  if (const json* lp = field(b, "logprobs")) {
    // Completions: an integer N = top-N alternatives (a boolean is accepted as 0 / none).
    if (lp->is_boolean()) {
      r.logprobs = lp->get<bool>();
      r.params.logprobs = r.logprobs ? 0 : -1;
    } else {
      int n = get_int(b, "logprobs", 0);
      if (n < 0 || n > 20) throw bad_request("'logprobs' must be in [0, 20], got " + std::to_string(n), "logprobs");
      r.logprobs = true;
      r.params.logprobs = n;
    }
  }
  parse_echo_suffix(b, r);
  r.return_token_ids = get_bool(b, "return_token_ids", false);
  parse_constraints(b, body, max_json_depth, r);
  rank_needs_logprobs(r);
  validate_params(r);
  return r;
}

GenerationRequest parse_chat_request(const std::string& body, size_t max_json_depth) {
  const json b = parse_request_body(body, max_json_depth);
  GenerationRequest r;
  r.chat = true;
  const json* msgs = field(b, "messages");
  if (!msgs) throw bad_request("'messages' is required", "messages", "missing_parameter");
  if (!msgs->is_array()) throw type_error("messages", "a list of message objects");
  if (msgs->empty()) throw bad_request("'messages' must not be empty", "messages");
  r.messages = json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    if (!m.is_object()) throw type_error("messages", "a list of message objects");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      throw bad_request("'messages[" + std::to_string(i) + "].role' must be a string", "messages", "invalid_type");
    json out = m;  // keep tool_calls, name, tool_call_id, reasoning_content, ...
    auto content = m.find("content");
    if (content != m.end() && !content->is_null()) out["content"] = content_to_text(*content, i);
    else out["content"] = "";
    r.messages.push_back(std::move(out));
  }
  parse_common(b, r);
  // Unset: the rest of the context window, known only after tokenization (engine thread).
  r.params.max_tokens = 1 << 30;
  set_max_tokens(b, r, "max_tokens");
  set_max_tokens(b, r, "max_completion_tokens");  // the newer name wins
  const bool lp = get_bool(b, "logprobs", false);
  const int top = get_int(b, "top_logprobs", 0);
  if (top < 0 || top > 20) throw bad_request("'top_logprobs' must be in [0, 20], got " + std::to_string(top), "top_logprobs");
  if (field(b, "top_logprobs") && !lp)
    throw bad_request("'top_logprobs' requires 'logprobs' = true", "top_logprobs");
  r.logprobs = lp;
  r.params.logprobs = lp ? top : -1;
  if (const json* k = field(b, "chat_template_kwargs")) {
    if (!k->is_object()) throw type_error("chat_template_kwargs", "an object");
    r.template_kwargs = *k;
  }
  parse_reasoning_effort(b, r);
  parse_constraints(b, body, max_json_depth, r);
  r.add_generation_prompt = get_bool(b, "add_generation_prompt", true);
  rank_needs_logprobs(r);
  validate_params(r);
  return r;
}

}  // namespace nanovllm::server
