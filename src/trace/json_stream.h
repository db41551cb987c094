// JsonStream: appends JSON text to a std::string without building a document first.
// The tracer writes one event per engine milestone on the step's critical path, so this is a
// plain append (std::to_chars, no allocation per value beyond the string's growth) rather than
// nlohmann::json objects (a map node per key). Commas are inserted automatically: every
// begin_*/value call knows whether it follows a sibling. Strings needing escapes (rare: paths,
// messages) go through nlohmann's serializer.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace nanovllm::trace {

class JsonStream {
 public:
  explicit JsonStream(std::string& out) : out_(out) {}

  JsonStream& begin_object();
  JsonStream& end_object();
  JsonStream& begin_array();
  JsonStream& end_array();
  // A key inside an object; the next value (or begin_*) is its value.
  JsonStream& key(std::string_view k);

  JsonStream& value(int64_t v);
  JsonStream& value(int v) { return value(int64_t(v)); }
  JsonStream& value(uint64_t v);
  // Fixed notation with `decimals` digits (timestamps in microseconds: 3 = nanoseconds).
  // Non-finite values are written as null (JSON has no NaN/Inf).
  JsonStream& value(double v, int decimals = 3);
  JsonStream& value(bool v);
  JsonStream& value(std::string_view s);
  JsonStream& value(const char* s) { return value(std::string_view(s)); }
  JsonStream& null();
  // A value that is already serialized JSON (e.g. nlohmann::json::dump()), inserted verbatim.
  JsonStream& raw(std::string_view json);

  // key + value in one call.
  template <class T>
  JsonStream& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }
  JsonStream& field(std::string_view k, double v, int decimals) {
    key(k);
    return value(v, decimals);
  }

  // True when every object/array opened has been closed.
  bool balanced() const { return depth_ == 0; }
  // Forget the nesting state (the next value starts a fresh top-level value; no comma).
  void reset() {
    depth_ = 0;
    has_sibling_ = 0;
    after_key_ = false;
  }

 private:
  void separate();  // a comma before a sibling value
  template <class Int>
  JsonStream& integer(Int v);
  void open(char bracket);
  void close(char bracket);
  std::string& out_;
  int depth_ = 0;
  uint64_t has_sibling_ = 0;  // bit d: the container at depth d already holds a value
  bool after_key_ = false;
};

// Escaped JSON string literal (with quotes) of `s`.
std::string json_quote(std::string_view s);

}  // namespace nanovllm::trace
