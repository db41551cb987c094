// The one server `nanovllm replay --url` talks to. Every request goes to this scheme, host and
// port, at a path made of the URL's own path and the recorded route; redirects are not followed,
// so no traffic goes anywhere else.
#pragma once
#include <string>

namespace nanovllm::replay {

struct TargetUrl {
  std::string scheme;  // http | https
  std::string host;
  int port = 0;
  std::string base_path;  // "" or "/prefix" (no trailing slash)
  std::string origin() const;  // scheme://host:port
  std::string path(const std::string& route) const { return base_path + route; }
};

// "http://127.0.0.1:8000", "https://host/prefix": throws nanovllm::Error saying what is wrong
// (another scheme, no host, a user name, a query, a bad port).
TargetUrl parse_target_url(const std::string& url);

}  // namespace nanovllm::replay
