#include "util/json_bounded.h"

#include <algorithm>
#include <fstream>
#include <utility>
#include <vector>

#include "util/check.h"

namespace nanovllm {
namespace {

// nlohmann's DOM builder with a depth count: start_object/start_array beyond the limit stop the
// parse (returning false ends sax_parse) before anything deeper is built.
template <class J>
class BoundedSax {
 public:
  using number_integer_t = typename J::number_integer_t;
  using number_unsigned_t = typename J::number_unsigned_t;
  using number_float_t = typename J::number_float_t;
  using string_t = typename J::string_t;
  using binary_t = typename J::binary_t;

  BoundedSax(J& out, size_t max_depth) : dom_(out, /*allow_exceptions=*/false), max_depth_(max_depth) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) { return dom_.number_float(v, s); }
  bool string(string_t& v) { return dom_.string(v); }
  bool binary(binary_t& v) { return dom_.binary(v); }
  bool key(string_t& v) { return dom_.key(v); }
  bool start_object(std::size_t n) { return open() && dom_.start_object(n); }
  bool start_array(std::size_t n) { return open() && dom_.start_array(n); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& token, const nlohmann::detail::exception& e) {
    error_ = e.what();
    (void)pos;
    (void)token;
    return false;
  }

  bool too_deep() const { return too_deep_; }
  const std::string& error() const { return error_; }

 private:
  bool open() {
    if (++depth_ > max_depth_) {
      too_deep_ = true;
      return false;
    }
    return true;
  }

  nlohmann::detail::json_sax_dom_parser<J> dom_;
  size_t max_depth_;
  size_t depth_ = 0;
  bool too_deep_ = false;
  std::string error_;
};

template <class J>
J parse_impl(std::string_view text, const std::string& what, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    NV_THROW(what, ": JSON text is ", text.size(), " bytes, more than the limit of ", limits.max_bytes);
  J out;
  BoundedSax<J> sax(out, limits.max_depth);
  bool ok = false;
  try {
    ok = J::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json,
                      /*strict=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {  // e.g. from a SAX event; never expected
    NV_THROW(what, ": malformed JSON: ", e.what());
  }
  if (sax.too_deep()) NV_THROW(what, ": JSON nested deeper than ", limits.max_depth, " levels");
  if (!ok) {
    std::string msg = sax.error();
    // nlohmann prefixes "[json.exception.parse_error.101] "; the rest says where and what.
    if (const size_t p = msg.find("] "); p != std::string::npos && msg.rfind("[json.exception", 0) == 0)
      msg = msg.substr(p + 2);
    NV_THROW(what, ": malformed JSON: ", msg.empty() ? "syntax error" : msg);
  }
  return out;
}

std::string read_text_file(const std::string& path, const JsonLimits& limits) {
  std::ifstream f(path, std::ios::binary);
  NV_CHECK(f.good(), "cannot open '", path, "'");
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  NV_CHECK(size >= 0, "cannot read '", path, "'");
  if (uint64_t(size) > limits.max_bytes)
    NV_THROW(path, ": JSON file is ", size, " bytes, more than the limit of ", limits.max_bytes);
  f.seekg(0, std::ios::beg);
  std::string text(size_t(size), '\0');
  f.read(text.data(), size);
  NV_CHECK(f.gcount() == size, "cannot read '", path, "'");
  return text;
}

template <class J>
size_t depth_impl(const J& root) {
  // Explicit stack of (container, depth) pairs instead of recursion.
  std::vector<std::pair<const J*, size_t>> todo{{&root, root.is_structured() ? 1 : 0}};
  size_t deepest = 0;
  while (!todo.empty()) {
    auto [j, d] = todo.back();
    todo.pop_back();
    deepest = std::max(deepest, d);
    if (!j->is_structured()) continue;
    for (auto it = j->begin(); it != j->end(); ++it)
      if (it->is_structured()) todo.emplace_back(&*it, d + 1);
  }
  return deepest;
}

}  // namespace

size_t json_depth(const nlohmann::json& j) { return depth_impl(j); }
size_t json_depth(const nlohmann::ordered_json& j) { return depth_impl(j); }

nlohmann::json parse_json(std::string_view text, const std::string& what, const JsonLimits& limits) {
  return parse_impl<nlohmann::json>(text, what, limits);
}

nlohmann::ordered_json parse_ordered_json(std::string_view text, const std::string& what,
                                          const JsonLimits& limits) {
  return parse_impl<nlohmann::ordered_json>(text, what, limits);
}

nlohmann::json read_json_file(const std::string& path, const JsonLimits& limits) {
  return parse_json(read_text_file(path, limits), path, limits);
}

nlohmann::ordered_json read_ordered_json_file(const std::string& path, const JsonLimits& limits) {
  return parse_ordered_json(read_text_file(path, limits), path, limits);
}

}  // namespace nanovllm
