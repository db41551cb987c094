#include "server/api_error.h"

namespace nanovllm::server {

std::string error_type_for_status(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 405: return "invalid_request_error";
    case 413: return "invalid_request_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

nlohmann::json error_json(int status, const std::string& message, const std::string& type,
                          const std::string& param, const std::string& code) {
  nlohmann::json e;
  e["message"] = message;
  e["type"] = type.empty() ? error_type_for_status(status) : type;
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return nlohmann::json{{"error", e}};
}

nlohmann::json error_json(const ApiError& e) {
  return error_json(e.status, e.what(), e.type, e.param, e.code);
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string client_message(const std::string& what) {
  // Only the old location suffix " [error at f:l]" / " [check failed: ... at f:l]": a message may
  // end in a bracket of its own ("must be in [-2, 2]").
  const size_t p = what.rfind(" [");
  if (p != std::string::npos && what.back() == ']' &&
      (what.compare(p + 2, 9, "error at ") == 0 || what.compare(p + 2, 13, "check failed:") == 0))
    return what.substr(0, p);
  return what;
}

}  // namespace nanovllm::server
