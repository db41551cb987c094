// nanovllm::Error: the message is for users (no source path); where() keeps file:line.
#include <gtest/gtest.h>

#include <string>

#include "util/check.h"

namespace nanovllm {
namespace {

std::string message_of(void (*fn)(), std::string* where = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (where) *where = e.where();
    return e.what();
  }
  return "(no throw)";
}

TEST(Check, MessageHasNoSourcePathWhereHasARelativeOne) {
  std::string where;
  const std::string m = message_of([] { NV_CHECK(1 + 1 == 3, "max_tokens must be >= 1, got ", 0); }, &where);
  EXPECT_EQ(m, "max_tokens must be >= 1, got 0");
  EXPECT_EQ(m.find(".cc"), std::string::npos);
  EXPECT_NE(where.find("check failed: 1 + 1 == 3 at "), std::string::npos) << where;
  // Relative to the source tree (-fmacro-prefix-map): no path of the build machine.
  EXPECT_NE(where.find(" at tests/unit/util/check_test.cc:"), std::string::npos) << where;
}

TEST(Check, WithoutAMessageItIsAnInternalErrorNamingTheCondition) {
  EXPECT_EQ(message_of([] { NV_CHECK(2 < 1); }), "internal error (check failed: 2 < 1)");
  EXPECT_EQ(message_of([] { NV_CHECK_EQ(3, 4); }), "internal error (check failed: 3 == 4: 3 vs 4)");
  EXPECT_EQ(message_of([] { NV_CHECK_EQ(3, 4, "one token per row"); }), "one token per row (3 vs 4)");
  EXPECT_EQ(message_of([] { NV_THROW("bad ", "value"); }), "bad value");
  EXPECT_EQ(message_of([] { throw Error("plain"); }), "plain");
  std::string where = "x";
  (void)message_of([] { throw Error("plain"); }, &where);
  EXPECT_EQ(where, "");
}

}  // namespace
}  // namespace nanovllm
