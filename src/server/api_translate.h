// Shared pieces of the request translators (responses_request, anthropic_request): both read a
// body in another API's shape (keys in order, so that JSON schemas keep their property order)
// and write an OpenAI chat-completions body, which parse_chat_request then validates like any
// chat request: one set of sampling rules, limits and constraint compilation for every API.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace nanovllm::server {

using ojson = nlohmann::ordered_json;

// The field, or null when it is missing or JSON null (clients send explicit nulls).
const ojson* opt_field(const ojson& b, const char* key);

// 400 "'<param>' must be <want>" (code invalid_type).
ApiError field_type_error(const std::string& param, const std::string& want);

// A string field (absent -> `def`); another type is a 400 naming `param`.
std::string string_field(const ojson& b, const char* key, const std::string& param, const std::string& def = "");

// "base[i]": an element's name in messages.
std::string idx(const std::string& base, size_t i);

// 400 "<what> is not supported by this server" (code unsupported_parameter).
ApiError unsupported(const std::string& what, const std::string& param);

// The body as an ordered JSON object within the depth limit (400 invalid_json otherwise).
ojson parse_ordered_body(const std::string& body, size_t max_json_depth);

// Copies the sampling fields that are spelled the same in both APIs (temperature, top_p, top_k,
// seed, min_p, penalties, ...: vLLM accepts them on every route) from `from` to `chat`.
void copy_sampling_fields(const ojson& from, ojson& chat);

// The translated chat body through parse_chat_request. Its errors name OpenAI's fields; `rename`
// maps such a name to the caller's API's ("stop" -> "stop_sequences").
GenerationRequest parse_translated_chat(const ojson& chat, size_t max_json_depth,
                                        const std::vector<std::pair<std::string, std::string>>& rename);

}  // namespace nanovllm::server
