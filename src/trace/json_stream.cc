#include "trace/json_stream.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "util/check.h"

namespace nanovllm::trace {

namespace {

// Fast path: names, reasons and numbers-as-text need no escaping; anything else goes through
// nlohmann's serializer (quotes, backslashes, control characters; UTF-8 kept as is).
void append_escaped(std::string& out, std::string_view s) {
  bool plain = true;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) {
      plain = false;
      break;
    }
  }
  if (plain) {
    out.push_back('"');
    out.append(s);
    out.push_back('"');
  } else {
    out += nlohmann::json(std::string(s))
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

}  // namespace

void JsonStream::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  const uint64_t bit = uint64_t(1) << depth_;
  if (has_sibling_ & bit) out_.push_back(',');
  has_sibling_ |= bit;
}

void JsonStream::open(char bracket) {
  separate();
  out_.push_back(bracket);
  NV_CHECK_LT(depth_, 63, "JSON nested too deeply");
  ++depth_;
  has_sibling_ &= ~(uint64_t(1) << depth_);
}

void JsonStream::close(char bracket) {
  NV_CHECK(depth_ > 0 && !after_key_, "'", bracket, "' without a matching opening bracket");
  --depth_;
  out_.push_back(bracket);
}

JsonStream& JsonStream::begin_object() {
  open('{');
  return *this;
}
JsonStream& JsonStream::end_object() {
  close('}');
  return *this;
}
JsonStream& JsonStream::begin_array() {
  open('[');
  return *this;
}
JsonStream& JsonStream::end_array() {
  close(']');
  return *this;
}

JsonStream& JsonStream::key(std::string_view k) {
  separate();
  append_escaped(out_, k);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

template <class Int>
JsonStream& JsonStream::integer(Int v) {
  separate();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out_.append(buf, r.ptr);
  return *this;
}

JsonStream& JsonStream::value(int64_t v) { return integer(v); }
JsonStream& JsonStream::value(uint64_t v) { return integer(v); }

JsonStream& JsonStream::value(double v, int decimals) {
  if (!std::isfinite(v)) return null();
  separate();
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  if (r.ec != std::errc()) {  // |v| beyond 64 digits: scientific always fits
    r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, decimals);
  }
  out_.append(buf, r.ptr);
  return *this;
}

JsonStream& JsonStream::value(bool v) {
  separate();
  out_ += v ? "true" : "false";
  return *this;
}

JsonStream& JsonStream::value(std::string_view s) {
  separate();
  append_escaped(out_, s);
  return *this;
}

JsonStream& JsonStream::null() {
  separate();
  out_ += "null";
  return *this;
}

JsonStream& JsonStream::raw(std::string_view json) {
  separate();
  out_ += json;
  return *this;
}

std::string json_quote(std::string_view s) {
  std::string out;
  append_escaped(out, s);
  return out;
}

}  // namespace nanovllm::trace
