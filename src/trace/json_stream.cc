#include "trace/json_stream.h"

#include <charconv>
#include <cmath>

#include "util/check.h"

namespace nanovllm::trace {

namespace {

void append_escaped(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(hex[c >> 4]);
          out.push_back(hex[c & 15]);
        } else {
          out.push_back(ch);  // UTF-8 bytes pass through unchanged
        }
    }
  }
  out.push_back('"');
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

JsonStream& JsonStream::begin_object() {
  separate();
  out_.push_back('{');
  NV_CHECK_LT(depth_, 63, "JSON nested too deeply");
  ++depth_;
  has_sibling_ &= ~(uint64_t(1) << depth_);
  return *this;
}

JsonStream& JsonStream::end_object() {
  NV_CHECK(depth_ > 0 && !after_key_, "end_object without a matching begin_object");
  --depth_;
  out_.push_back('}');
  return *this;
}

JsonStream& JsonStream::begin_array() {
  separate();
  out_.push_back('[');
  NV_CHECK_LT(depth_, 63, "JSON nested too deeply");
  ++depth_;
  has_sibling_ &= ~(uint64_t(1) << depth_);
  return *this;
}

JsonStream& JsonStream::end_array() {
  NV_CHECK(depth_ > 0 && !after_key_, "end_array without a matching begin_array");
  --depth_;
  out_.push_back(']');
  return *this;
}

JsonStream& JsonStream::key(std::string_view k) {
  separate();
  append_escaped(out_, k);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

JsonStream& JsonStream::value(int64_t v) {
  separate();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out_.append(buf, r.ptr);
  return *this;
}

JsonStream& JsonStream::value(uint64_t v) {
  separate();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out_.append(buf, r.ptr);
  return *this;
}

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
