// Error handling: every failure becomes nanovllm::Error carrying file:line and the values
// involved. API boundaries (CLI, server, Python) catch it and print a clear message.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace nanovllm {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... R>
void append(std::ostringstream& os, const T& v, const R&... rest) {
  os << v;
  append(os, rest...);
}
template <class... A>
[[noreturn]] void fail(const char* file, int line, const char* what, const A&... msg) {
  std::ostringstream os;
  append(os, msg...);
  std::string m = os.str();
  std::ostringstream full;
  full << m;
  if (!m.empty()) full << " ";
  full << "[" << what << " at " << file << ":" << line << "]";
  throw Error(full.str());
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
      ::nanovllm::detail::fail(__FILE__, __LINE__, "check failed: " #a " " #op " " #b,      \
                               "(", _nv_a, " vs ", _nv_b, ") ", ##__VA_ARGS__);           \
  } while (0)

#define NV_CHECK_EQ(a, b, ...) NV_CHECK_OP_(a, b, ==, ##__VA_ARGS__)
#define NV_CHECK_NE(a, b, ...) NV_CHECK_OP_(a, b, !=, ##__VA_ARGS__)
#define NV_CHECK_LT(a, b, ...) NV_CHECK_OP_(a, b, <, ##__VA_ARGS__)
#define NV_CHECK_LE(a, b, ...) NV_CHECK_OP_(a, b, <=, ##__VA_ARGS__)
#define NV_CHECK_GT(a, b, ...) NV_CHECK_OP_(a, b, >, ##__VA_ARGS__)
#define NV_CHECK_GE(a, b, ...) NV_CHECK_OP_(a, b, >=, ##__VA_ARGS__)

}  // namespace nanovllm
