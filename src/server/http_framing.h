// How a request's body is delimited and whether the connection stays open, decided from the
// headers before any body byte is read (RFC 9112 sections 6 and 9.6). cpp-httplib reads a body
// by the first Content-Length it finds, parsed with strtoull ("-5" becomes 2^64 - 5, and it
// then tries to skip that many bytes), and reads an unknown Transfer-Encoding to the end of the
// connection; so every request's framing is checked here first and a bad one is answered at
// once (and the connection closed) instead of being read.
#pragma once
#include <cstdint>
#include <string>

#include "server/api_error.h"
#include "server/httplib_include.h"

namespace nanovllm::server {

struct BodyFraming {
  enum class Kind { kNone, kLength, kChunked };
  Kind kind = Kind::kNone;
  uint64_t length = 0;  // kLength: the Content-Length (> 0)
  bool has_body() const { return kind != Kind::kNone; }
};

// Throws ApiError: 400 for a malformed or conflicting Content-Length, Content-Length together
// with Transfer-Encoding, or a repeated Transfer-Encoding; 501 for a transfer coding other than
// "chunked"; 413 for a Content-Length above `max_body_bytes`. Content-Length: 0 is kNone.
BodyFraming body_framing(const httplib::Headers& headers, uint64_t max_body_bytes);

// True when the client asked to close after this response: a "close" token in any Connection
// header (case-insensitive, comma-separated list), or HTTP/1.0 without "keep-alive".
bool wants_connection_close(const httplib::Headers& headers, const std::string& version);

// A Content-Length value: 1*DIGIT with optional surrounding blanks (at most 18 digits);
// -1 when malformed.
int64_t parse_content_length(const std::string& value);

}  // namespace nanovllm::server
