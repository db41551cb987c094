#include "server/http_framing.h"

#include <cctype>

namespace nanovllm::server {
namespace {

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) --b;
  return s.substr(a, b - a);
}

bool iequals(const std::string& a, const char* b) {
  size_t i = 0;
  for (; i < a.size() && b[i]; ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return i == a.size() && b[i] == '\0';
}

// Printable, bounded echo of a client-supplied header value for error messages.
std::string quoted(const std::string& v) {
  std::string out = "'";
  for (size_t i = 0; i < v.size() && i < 40; ++i) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    out += (c >= 0x20 && c < 0x7f) ? char(c) : '?';
  }
  if (v.size() > 40) out += "...";
  return out + "'";
}

}  // namespace

int64_t parse_content_length(const std::string& value) {
  const std::string v = trim(value);
  if (v.empty() || v.size() > 18) return -1;  // 18 digits < 2^63: no overflow below
  int64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

BodyFraming body_framing(const httplib::Headers& headers, uint64_t max_body_bytes) {
  BodyFraming f;
  const auto te = headers.equal_range("Transfer-Encoding");
  const auto cl = headers.equal_range("Content-Length");
  const bool has_te = te.first != te.second, has_cl = cl.first != cl.second;
  if (has_te && has_cl)
    throw bad_request("a request must not carry both Content-Length and Transfer-Encoding", "", "bad_framing");
  if (has_te) {
    if (std::next(te.first) != te.second)
      throw bad_request("repeated Transfer-Encoding header", "", "bad_framing");
    if (!iequals(trim(te.first->second), "chunked"))
      throw ApiError(501, "Transfer-Encoding " + quoted(te.first->second) + " is not supported (only chunked)",
                     "invalid_request_error", "", "unsupported_transfer_encoding");
    f.kind = BodyFraming::Kind::kChunked;
    return f;
  }
  if (!has_cl) return f;
  int64_t len = -1;
  for (auto it = cl.first; it != cl.second; ++it) {
    const int64_t v = parse_content_length(it->second);
    if (v < 0)
      throw bad_request("invalid Content-Length " + quoted(it->second) + " (must be a non-negative integer)", "",
                        "bad_framing");
    if (len >= 0 && v != len) throw bad_request("conflicting Content-Length headers", "", "bad_framing");
    len = v;
  }
  if (uint64_t(len) > max_body_bytes)
    throw ApiError(413, "request body of " + std::to_string(len) + " bytes is over the limit of " +
                            std::to_string(max_body_bytes) + " bytes (--max-body-bytes)",
                   "invalid_request_error", "", "payload_too_large");
  if (len > 0) {
    f.kind = BodyFraming::Kind::kLength;
    f.length = uint64_t(len);
  }
  return f;
}

bool wants_connection_close(const httplib::Headers& headers, const std::string& version) {
  bool close = false, keep_alive = false;
  const auto range = headers.equal_range("Connection");
  for (auto it = range.first; it != range.second; ++it) {
    const std::string& v = it->second;
    size_t start = 0;
    while (start <= v.size()) {
      size_t comma = v.find(',', start);
      if (comma == std::string::npos) comma = v.size();
      const std::string token = trim(v.substr(start, comma - start));
      if (iequals(token, "close")) close = true;
      if (iequals(token, "keep-alive")) keep_alive = true;
      start = comma + 1;
    }
  }
  if (close) return true;
  return version == "HTTP/1.0" && !keep_alive;
}

}  // namespace nanovllm::server
