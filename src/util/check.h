// Error handling: every failure becomes nanovllm::Error. Its message (what()) is for users: what
// is wrong and what to do, never a source path. Where it was raised (file:line relative to the
// source tree, and the failed condition) is kept apart in where(), for `--verbose` and debug logs.
// API boundaries (CLI, server, Python) catch it and print the message.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace nanovllm {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, std::string where = {})
      : std::runtime_error(message), where_(std::move(where)) {}
  explicit Error(const char* message) : std::runtime_error(message) {}
  // "check failed: n > 0 at src/engine/config.cc:17", or "" when thrown without a location.
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... R>
void append(std::ostringstream& os, const T& v, const R&... rest) {
  os << v;
  append(os, rest...);
}
// A check without a message is an internal invariant: the message then says so and names the
// condition (still no source path).
template <class... A>
[[noreturn]] void fail(const char* file, int line, const char* what, const A&... msg) {
  std::ostringstream os;
  append(os, msg...);
  std::string m = os.str();
  if (m.empty() || m.find_first_not_of(' ') == std::string::npos) m = std::string("internal error (") + what + ")";
  std::ostringstream where;
  where << what << " at " << file << ":" << line;
  throw Error(m, where.str());
}
// NV_CHECK_EQ & co.: "message (a vs b)", or without a message "internal error (check failed:
// a == b: 3 vs 4)".
template <class X, class Y, class... A>
[[noreturn]] void fail_op(const char* file, int line, const char* what, const X& a, const Y& b, const A&... msg) {
  std::ostringstream os;
  append(os, msg...);
  std::ostringstream values;
  values << a << " vs " << b;
  std::string m = os.str();
  if (m.empty()) m = std::string("internal error (") + what + ": " + values.str() + ")";
  else m += " (" + values.str() + ")";
  std::ostringstream where;
  where << what << " at " << file << ":" << line;
  throw Error(m, where.str());
}
}  // namespace detail

// Builds a message from all arguments (streamed) and throws nanovllm::Error.
#define NV_THROW(...) ::nanovllm::detail::fail(__FILE__, __LINE__, "error", __VA_ARGS__)

#define NV_CHECK(cond, ...)                                                               \
  do {                                                                                    \
    if (!(cond)) ::nanovllm::detail::fail(__FILE__, __LINE__, "check failed: " #cond, ##__VA_ARGS__); \
  } while (0)

#define NV_CHECK_OP_(a, b, op, ...)                                                        \
  do {                                                                                    \
    auto&& _nv_a = (a);                                                                   \
    auto&& _nv_b = (b);                                                                   \
    if (!(_nv_a op _nv_b))                                                                \
      ::nanovllm::detail::fail_op(__FILE__, __LINE__, "check failed: " #a " " #op " " #b,   \
                                  _nv_a, _nv_b, ##__VA_ARGS__);                             \
  } while (0)

#define NV_CHECK_EQ(a, b, ...) NV_CHECK_OP_(a, b, ==, ##__VA_ARGS__)
#define NV_CHECK_NE(a, b, ...) NV_CHECK_OP_(a, b, !=, ##__VA_ARGS__)
#define NV_CHECK_LT(a, b, ...) NV_CHECK_OP_(a, b, <, ##__VA_ARGS__)
#define NV_CHECK_LE(a, b, ...) NV_CHECK_OP_(a, b, <=, ##__VA_ARGS__)
#define NV_CHECK_GT(a, b, ...) NV_CHECK_OP_(a, b, >, ##__VA_ARGS__)
#define NV_CHECK_GE(a, b, ...) NV_CHECK_OP_(a, b, >=, ##__VA_ARGS__)

}  // namespace nanovllm
