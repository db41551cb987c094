// Errors returned to HTTP clients in OpenAI's error-object format:
//   {"error": {"message": ..., "type": ..., "param": ... | null, "code": ... | null}}
// Request parsing and the engine bridge throw ApiError; the HTTP layer turns it into a response.
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace nanovllm::server {

struct ApiError : std::runtime_error {
  int status;         // HTTP status code
  std::string type;   // "invalid_request_error", "authentication_error", ...
  std::string param;  // offending request field ("" -> null)
  std::string code;   // short machine-readable code ("" -> null)
  ApiError(int status_, std::string message, std::string type_, std::string param_ = "",
           std::string code_ = "")
      : std::runtime_error(std::move(message)),
        status(status_),
        type(std::move(type_)),
        param(std::move(param_)),
        code(std::move(code_)) {}
};

// 400 invalid_request_error naming `param`.
inline ApiError bad_request(const std::string& message, const std::string& param = "",
                            const std::string& code = "invalid_value") {
  return ApiError(400, message, "invalid_request_error", param, code);
}

nlohmann::json error_json(const ApiError& e);
nlohmann::json error_json(int status, const std::string& message, const std::string& type,
                          const std::string& param = "", const std::string& code = "");
// The default error type for an HTTP status (400 -> invalid_request_error, 401 ->
// authentication_error, 404 -> not_found_error, 503 -> service_unavailable, 5xx -> server_error).
std::string error_type_for_status(int status);

// Strips a legacy " [error at file:line]" / " [check failed: ...]" suffix (nanovllm::Error no
// longer adds one: its location is Error::where()); any other text is kept whole.
std::string client_message(const std::string& what);

// Serializes JSON for the wire: invalid UTF-8 (e.g. a token that is half a character) is
// replaced by U+FFFD instead of throwing.
std::string dump_json(const nlohmann::json& j);

}  // namespace nanovllm::server
