// The CLI's flags (tools/engine_flags.cc) against the field tables (nanovllm/field.h): every row
// with a flag is accepted by the command line and sets its field, aliases included, and a value
// that breaks the row's rule is an error naming the flag. Nothing here lists the flags: a row
// added to a table is tested by the same loops.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <iomanip>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "engine_flags.h"
#include "nanovllm/config.h"
#include "nanovllm/sampling_params.h"
#include "util/check.h"

namespace nanovllm::cli {
namespace {

using ::testing::HasSubstr;

template <class M>
struct IsVector : std::false_type {};
template <class E>
struct IsVector<std::vector<E>> : std::true_type {};
template <class M>
struct IsOptional : std::false_type {};
template <class E>
struct IsOptional<std::optional<E>> : std::true_type {};
template <class>
[[maybe_unused]] constexpr bool kUnhandled = false;  // clang: used only in static_assert
// The member types a flag can set (engine_flags.cc asserts the same of every row with a flag).
template <class M>
constexpr bool kFlagType = std::is_arithmetic_v<M> || std::is_same_v<M, std::string> ||
                           NamedEnum<M> || std::is_same_v<M, std::vector<std::string>> ||
                           std::is_same_v<M, std::vector<int>> ||
                           std::is_same_v<M, std::optional<uint64_t>>;

// A value of row f other than v that f's rule accepts (bool rows are switches: not asked).
template <class T, class M>
std::optional<M> valid_other(const Field<T, M>& f, const M& v) {
  std::vector<M> candidates;
  if constexpr (std::is_arithmetic_v<M>) {
    candidates = {M(v + 1), M(v * 2), M(v + 16), M(v / 2), M(1), M(16)};
  } else if constexpr (std::is_same_v<M, std::string>) {
    for (std::string_view c : f.choices) candidates.emplace_back(c);
    candidates.push_back(v + "x");
  } else if constexpr (NamedEnum<M>) {
    for (size_t i = 0; i < enum_names(M{}).size(); ++i) candidates.push_back(static_cast<M>(i));
  } else if constexpr (std::is_same_v<M, std::vector<std::string>>) {
    candidates = {{"x"}, {"x", "y z"}};
  } else if constexpr (std::is_same_v<M, std::vector<int>>) {
    candidates = {{1, 2}, {7}};
  } else if constexpr (IsOptional<M>::value) {
    candidates = {M(7), M(123456789)};
  } else {
    static_assert(kUnhandled<M>, "a flag of a new type: teach valid_other() and args_for()");
  }
  for (const M& c : candidates)
    if (!(c == v) && value_problem(f, c).empty()) return c;
  return std::nullopt;
}

// The command-line words that set row f to v.
template <class T, class M>
std::vector<std::string> args_for(const Field<T, M>& f, const M& v) {
  const std::string flag(f.primary_flag());
  if constexpr (std::is_floating_point_v<M>) {
    std::ostringstream os;
    os << std::setprecision(9) << v;  // round-trips a float
    return {flag, os.str()};
  } else if constexpr (std::is_arithmetic_v<M>) {
    return {flag, std::to_string(v)};
  } else if constexpr (std::is_same_v<M, std::string>) {
    return {flag, v};
  } else if constexpr (NamedEnum<M>) {
    return {flag, std::string(enum_name(v))};
  } else if constexpr (std::is_same_v<M, std::vector<std::string>>) {  // repeatable
    std::vector<std::string> out;
    for (const auto& s : v) out.insert(out.end(), {flag, s});
    return out;
  } else if constexpr (std::is_same_v<M, std::vector<int>>) {  // "1,2"
    std::string s;
    for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return {flag, s};
  } else if constexpr (IsOptional<M>::value) {
    return {flag, std::to_string(*v)};
  } else {
    static_assert(kUnhandled<M>, "a flag of a new type: teach args_for()");
  }
}

// a == b, nested tables row by row.
template <class M>
bool same(const M& a, const M& b) {
  if constexpr (HasFields<M>) {
    bool eq = true;
    for_each_field<M>([&](const auto& g) { eq = eq && same(a.*g.member, b.*g.member); });
    return eq;
  } else {
    return a == b;
  }
}

void parse(CLI::App& app, std::vector<std::string> words) {
  std::vector<const char*> argv{"nanovllm"};
  for (const auto& w : words) argv.push_back(w.c_str());
  app.parse(int(argv.size()), argv.data());
}

template <class T>
void add_flags_of(CLI::App& app, T& t) {
  if constexpr (std::is_same_v<T, Config>)
    add_engine_flags(app, t);
  else
    add_sampling_flags(app, t);
}

// For every row of T's table with a flag: a command line with that flag alone sets the field to
// the value given (bool switches: the opposite of the default), and nothing else changes.
template <class T>
void every_flag_sets_its_field() {
  int flags = 0;
  for_each_field<T>([&](const auto& f) {
    using M = typename std::remove_cvref_t<decltype(f)>::Member;
    if (f.flag.empty()) return;
    if constexpr (!kFlagType<M>) {
      ADD_FAILURE() << f.flag << ": a flag of a type this test cannot set";
    } else {
      ++flags;
      SCOPED_TRACE(std::string(f.flag));
      T t{};
      CLI::App app;
      add_flags_of(app, t);
      const T defaults = t;  // (add_engine_flags also sets worker_command)
      M expected{};
      std::vector<std::string> words;
      if constexpr (std::is_same_v<M, bool>) {
        expected = !(defaults.*f.member);
        words = {std::string(f.primary_flag())};
      } else {
        const std::optional<M> v = valid_other(f, defaults.*f.member);
        ASSERT_TRUE(v.has_value()) << "no valid non-default value found for " << f.flag
                                   << ": extend valid_other()";
        expected = *v;
        words = args_for(f, *v);
      }
      ASSERT_NO_THROW(parse(app, words)) << f.flag;
      if constexpr (std::is_floating_point_v<M>)
        EXPECT_FLOAT_EQ(t.*f.member, expected);
      else
        EXPECT_TRUE(t.*f.member == expected) << f.name << " not set by " << f.flag;
      // Only that field changed: every other row keeps its default.
      for_each_field<T>([&](const auto& g) {
        if constexpr (std::is_same_v<decltype(g.member), decltype(f.member)>)
          if (g.member == f.member) return;
        EXPECT_TRUE(same(t.*g.member, defaults.*g.member)) << f.flag << " changed " << g.name;
      });
    }
  });
  EXPECT_GT(flags, 0);
}

TEST(CliFlags, EveryConfigFlagSetsItsField) { every_flag_sets_its_field<Config>(); }
TEST(CliFlags, EverySamplingFlagSetsItsField) { every_flag_sets_its_field<SamplingParams>(); }

// A row's aliases ("--tensor-parallel-size,--tp") are flags too.
TEST(CliFlags, AliasesSetTheField) {
  int aliases = 0;
  for_each_field<Config>([&](const auto& f) {
    using M = typename std::remove_cvref_t<decltype(f)>::Member;
    if constexpr (std::is_same_v<M, int>) {
      for (size_t at = f.flag.find(','); at != std::string_view::npos;
           at = f.flag.find(',', at + 1)) {
        const size_t end = f.flag.find(',', at + 1);
        const std::string alias(f.flag.substr(at + 1, end - at - 1));
        Config c;
        CLI::App app;
        add_engine_flags(app, c);
        const std::optional<M> v = valid_other(f, c.*f.member);
        ASSERT_TRUE(v.has_value());
        parse(app, {alias, std::to_string(*v)});
        EXPECT_EQ(c.*f.member, *v) << alias;
        ++aliases;
      }
    }
  });
  EXPECT_GE(aliases, 1);  // --tp
}

std::string error_of(std::vector<std::string> words) {
  Config c;
  SamplingParams p;
  CLI::App app;
  add_engine_flags(app, c);
  add_sampling_flags(app, p);
  try {
    parse(app, std::move(words));
    p.validate();
  } catch (const Error& e) {
    return e.what();
  } catch (const CLI::ParseError& e) {
    return std::string("CLI11: ") + e.what();
  }
  return "accepted";
}

// A value that breaks the row's rule or choices is refused at parse time, naming the flag.
TEST(CliFlags, BadValuesNameTheFlag) {
  EXPECT_EQ(error_of({"--max-num-seqs", "0"}), "--max-num-seqs must be >= 1, got 0");
  EXPECT_EQ(error_of({"--kv-cache-dtype", "f16"}),
            "--kv-cache-dtype must be auto, f32, bf16 or int8, got 'f16'");
  EXPECT_EQ(error_of({"--device", "tpu"}), "--device must be auto, cpu or cuda, got 'tpu'");
  EXPECT_EQ(error_of({"--tp", "0"}), "--tensor-parallel-size must be >= 1, got 0");
  EXPECT_EQ(error_of({"--block-size", "24"}),
            "--block-size must be a positive multiple of 16, got 24");
  EXPECT_EQ(error_of({"--top-p", "0"}), "--top-p must be in (0, 1], got 0");
  EXPECT_EQ(error_of({"--stop", ""}), "--stop strings must be non-empty, got an empty string");
  EXPECT_THAT(error_of({"--stop-token-ids", "1,x"}), HasSubstr("invalid token id 'x' in '1,x'"));
  EXPECT_THAT(error_of({"--quantization", "int5"}),
              HasSubstr("--quantization must be auto, none, int8, int8-g32, int4, "));
  // What involves two fields is validate()'s, after parsing (naming the fields).
  EXPECT_EQ(error_of({"--max-tokens", "2", "--min-tokens", "5"}),
            "min_tokens must be in [0, max_tokens=2], got 5");
  // A value CLI11 cannot convert stays CLI11's error.
  EXPECT_THAT(error_of({"--max-num-seqs", "many"}), HasSubstr("CLI11: "));
  EXPECT_EQ(error_of({"--seed", "-1", "--stop", "a", "--stop", "b"}), "accepted");
}

// `nanovllm logits` takes a few engine flags by field name; a name with no flag is a bug.
TEST(CliFlags, ConfigFlagsByFieldName) {
  Config c;
  CLI::App app;
  add_config_flags(app, c, {"device", "kv_cache_dtype"});
  parse(app, {"--device", "cpu", "--kv-cache-dtype", "bf16"});
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.kv_cache_dtype, "bf16");
  CLI::App other;
  EXPECT_THROW(add_config_flags(other, c, {"backend"}), Error);
  EXPECT_THROW(add_config_flags(other, c, {"no_such_field"}), Error);
}

}  // namespace
}  // namespace nanovllm::cli
