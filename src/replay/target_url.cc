#include "replay/target_url.h"

#include <cctype>

#include "util/check.h"

namespace nanovllm::replay {

std::string TargetUrl::origin() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return scheme + "://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

TargetUrl parse_target_url(const std::string& url) {
  TargetUrl t;
  const size_t sep = url.find("://");
  NV_CHECK(sep != std::string::npos, "--url '", url, "' must start with http:// or https://");
  t.scheme = url.substr(0, sep);
  for (char& c : t.scheme) c = char(std::tolower(static_cast<unsigned char>(c)));
  NV_CHECK(t.scheme == "http" || t.scheme == "https", "--url '", url,
           "': scheme must be http or https, got '", t.scheme, "'");
  std::string rest = url.substr(sep + 3);
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  t.base_path = slash == std::string::npos ? "" : rest.substr(slash);
  NV_CHECK(t.base_path.find_first_of("?#") == std::string::npos, "--url '", url,
           "': no query or fragment (the recorded routes are appended to the path)");
  while (!t.base_path.empty() && t.base_path.back() == '/') t.base_path.pop_back();
  NV_CHECK(authority.find('@') == std::string::npos, "--url '", url,
           "': no user name in the URL (use --api-key)");
  std::string port;
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    NV_CHECK(close != std::string::npos, "--url '", url, "': unterminated [IPv6 address]");
    t.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      NV_CHECK(authority[close + 1] == ':', "--url '", url, "': bad port");
      port = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.find(':');
    t.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  NV_CHECK(!t.host.empty(), "--url '", url, "' has no host");
  if (port.empty()) {
    t.port = t.scheme == "https" ? 443 : 80;
  } else {
    size_t used = 0;
    long v = -1;
    try {
      v = std::stol(port, &used);
    } catch (...) {
      used = 0;
    }
    NV_CHECK(used == port.size() && v >= 1 && v <= 65535, "--url '", url, "': port must be 1..65535, got '",
             port, "'");
    t.port = int(v);
  }
  return t;
}

}  // namespace nanovllm::replay
