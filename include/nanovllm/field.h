// Field tables. Each options struct (Config, BackendOptions, SamplingParams,
// StructuredOutputsParams) lists its fields once, right after the struct, in
// `constexpr auto fields_of(const T*)`: a std::tuple of Field<T, M> rows (name, member pointer,
// CLI flag, help, value rule, choices, NANOVLLM_* variable). The front doors iterate the table
// instead of keeping lists of their own:
//   - the CLI registers a flag per row that has one (tools/engine_flags.cc);
//   - the Config JSON rank 0 sends to tensor-parallel workers (engine/config_json.cc);
//   - the Python classes' keywords, properties and repr (python/src/fields.h);
//   - the server's sampling fields (server/openai_request.cc);
//   - BackendOptions' defaults from the environment (util/backend_options.cc);
//   - validate(), whose errors name the field (or, at the CLI, the flag);
//   - the README check (tests/unit/engine/options_table_test.cc).
// A struct member without a row (or a row listed twice) fails to compile: see
// table_covers_struct() below.
#pragma once
#include <array>
#include <charconv>
#include <cstddef>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace nanovllm {

// ---- Enumerations named by strings at the edges (CLI, JSON, Python, environment) -------------

// An enum E is named when `enum_names(E{})` (found by argument-dependent lookup) returns a
// std::array of its names in enumerator order 0, 1, ... .
template <class E>
concept NamedEnum = std::is_enum_v<E> && requires { enum_names(E{}); };

template <NamedEnum E>
constexpr bool enum_valid(E e) {
  return static_cast<size_t>(e) < enum_names(E{}).size();
}

template <NamedEnum E>
constexpr std::string_view enum_name(E e) {
  return enum_valid(e) ? enum_names(E{})[static_cast<size_t>(e)] : std::string_view("?");
}

// false (out untouched) when `name` is none of E's names.
template <NamedEnum E>
constexpr bool enum_from_name(std::string_view name, E& out) {
  const auto names = enum_names(E{});
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) {
      out = static_cast<E>(i);
      return true;
    }
  return false;
}

// "auto, cpu or cuda" (an empty choice is written '').
inline std::string choice_list(std::span<const std::string_view> choices) {
  std::string s;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i) s += i + 1 == choices.size() ? " or " : ", ";
    s += choices[i].empty() ? std::string("''") : std::string(choices[i]);
  }
  return s;
}

// Parses text (an environment variable, a CLI value) into v: "" on success, else what is wrong
// ("must be an integer, got 'four'"). Numbers, bool (0 | 1), strings and named enums.
template <class M>
std::string parse_text(std::string_view s, M& v) {
  if constexpr (std::is_same_v<M, bool>) {
    if (s != "0" && s != "1") return "must be 0 or 1, got '" + std::string(s) + "'";
    v = s == "1";
  } else if constexpr (std::is_arithmetic_v<M>) {
    M x{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size())
      return std::string("must be ") + (std::is_integral_v<M> ? "an integer" : "a number") +
             ", got '" + std::string(s) + "'";
    v = x;
  } else if constexpr (NamedEnum<M>) {
    if (!enum_from_name(s, v))
      return "must be " + choice_list(enum_names(M{})) + ", got '" + std::string(s) + "'";
  } else {
    v = M(s);
  }
  return {};
}

// ---- Rows -----------------------------------------------------------------------------------

// A value rule: "" when the value is valid, else what is wrong with it, without the field's name
// ("must be >= 1, got 0"); the caller puts the field's name (or CLI flag) in front.
template <class M>
using Rule = std::string (*)(const M&);

template <class T, class M>
struct Field {
  using Struct = T;
  using Member = M;
  std::string_view name;  // the C++ member, the Python keyword, the JSON key
  M T::*member;
  // CLI11 option names: "--max-model-len"; aliases after commas ("--tensor-parallel-size,--tp").
  // Empty: no flag. A bool flag sets the field to the opposite of its default.
  std::string_view flag;
  std::string_view help;     // --help text
  Rule<M> rule = nullptr;    // nullptr: any value of M (choices, enums and nested tables are
                             // checked without one)
  std::span<const std::string_view> choices = {};  // std::string fields: the allowed values
  std::string_view env = {};  // the NANOVLLM_* variable that sets the default (BackendOptions)

  // "--tensor-parallel-size" of "--tensor-parallel-size,--tp".
  constexpr std::string_view primary_flag() const { return flag.substr(0, flag.find(',')); }
};

template <class T, class M>
constexpr Field<T, M> field(std::string_view name, M T::*member, std::string_view flag,
                            std::string_view help, std::type_identity_t<Rule<M>> rule = nullptr) {
  return {name, member, flag, help, rule};
}

// A std::string field whose value is one of `choices`.
template <class T>
constexpr Field<T, std::string> choice_field(std::string_view name, std::string T::*member,
                                             std::string_view flag, std::string_view help,
                                             std::span<const std::string_view> choices,
                                             Rule<std::string> rule = nullptr) {
  return {name, member, flag, help, rule, choices};
}

// A field whose default comes from the environment variable `env` (BackendOptions).
template <class T, class M>
constexpr Field<T, M> env_field(std::string_view name, M T::*member, std::string_view env,
                                std::string_view help,
                                std::type_identity_t<Rule<M>> rule = nullptr) {
  return {name, member, {}, help, rule, {}, env};
}

// ---- Common rules ---------------------------------------------------------------------------

// Bounds are integers: clang before 18 has no floating-point template arguments (make fuzz
// builds with clang), so a float field's [0, 1] is in_closed<0, 1> (compared as M(0), M(1)).
namespace rule {
template <auto B>
constexpr bool kIntegerBound = std::is_integral_v<decltype(B)>;
template <class V>
std::string got(std::string_view must, const V& v) {
  std::ostringstream os;
  os << "must be " << must << ", got " << v;
  return os.str();
}
template <auto Lo, class M>
std::string at_least(const M& v) {
  static_assert(kIntegerBound<Lo>, "integer bounds (see above)");
  if (v >= M(Lo)) return {};
  std::ostringstream os;
  os << ">= " << Lo;
  return got(os.str(), v);
}
template <auto Lo, auto Hi, class M>
std::string in_closed(const M& v) {  // [Lo, Hi]
  static_assert(kIntegerBound<Lo> && kIntegerBound<Hi>, "integer bounds (see above)");
  if (v >= M(Lo) && v <= M(Hi)) return {};
  std::ostringstream os;
  os << "in [" << Lo << ", " << Hi << "]";
  return got(os.str(), v);
}
template <auto Lo, auto Hi, class M>
std::string in_half_open(const M& v) {  // (Lo, Hi]
  static_assert(kIntegerBound<Lo> && kIntegerBound<Hi>, "integer bounds (see above)");
  if (v > M(Lo) && v <= M(Hi)) return {};
  std::ostringstream os;
  os << "in (" << Lo << ", " << Hi << "]";
  return got(os.str(), v);
}
}  // namespace rule

// ---- Tables ---------------------------------------------------------------------------------

template <class T>
concept HasFields = requires { fields_of(static_cast<const T*>(nullptr)); };

template <HasFields T>
inline constexpr auto kFields = fields_of(static_cast<const T*>(nullptr));

// fn(row) for every row of T's table, in table order.
template <HasFields T, class F>
constexpr void for_each_field(F&& fn) {
  std::apply([&](const auto&... f) { (fn(f), ...); }, kFields<T>);
}

template <HasFields T, class Label>
std::string fields_problem(const T& t, Label&& label);

// What is wrong with value v of row f ("must be >= 1, got 0"), or "" when it is valid.
template <class T, class M>
std::string value_problem(const Field<T, M>& f, const M& v) {
  if constexpr (std::is_same_v<M, std::string>) {
    if (!f.choices.empty()) {
      bool ok = false;
      for (std::string_view c : f.choices) ok = ok || c == v;
      if (!ok) return "must be " + choice_list(f.choices) + ", got '" + v + "'";
    }
  } else if constexpr (NamedEnum<M>) {
    if (!enum_valid(v)) return rule::got(choice_list(enum_names(M{})), int(v));
  } else if constexpr (HasFields<M>) {
    std::string p = fields_problem(v, [](const auto& g) { return g.name; });
    if (!p.empty()) return p;
  }
  return f.rule ? f.rule(v) : std::string();
}

// The first invalid field of t as "<label(row)> <problem>" ("max_num_seqs must be >= 1, got 0";
// a nested table's: "backend spin_us must be >= 0, got -1"), or "" when every field is valid.
template <HasFields T, class Label>
std::string fields_problem(const T& t, Label&& label) {
  std::string out;
  for_each_field<T>([&](const auto& f) {
    if (!out.empty()) return;
    std::string p = value_problem(f, t.*f.member);
    if (!p.empty()) out = std::string(label(f)) + " " + p;
  });
  return out;
}

// ---- Completeness: every member of T has exactly one row -----------------------------------

namespace detail {
struct AnyValue {
  template <class U>
  operator U() const;  // unevaluated only
};
template <class T, size_t... I>
constexpr bool brace_init_with(std::index_sequence<I...>) {
  return requires { T{(void(I), AnyValue{})...}; };
}
// The number of members of aggregate T: the most initializers T{...} takes.
template <class T, size_t N = 0>
constexpr size_t aggregate_member_count() {
  if constexpr (brace_init_with<T>(std::make_index_sequence<N + 1>{}))
    return aggregate_member_count<T, N + 1>();
  else
    return N;
}
template <class A, class B>
constexpr bool same_row(const A& a, const B& b) {
  if constexpr (std::is_same_v<A, B>)
    return a.member == b.member || a.name == b.name;
  else
    return a.name == b.name;
}
}  // namespace detail

// True when T's table has one row per member of T, no member or name twice. A member added to
// T without a row (every front door would silently skip it) fails the static_assert after the
// table.
template <HasFields T>
constexpr bool table_covers_struct() {
  constexpr auto& t = kFields<T>;
  bool distinct = true;
  std::apply(
      [&](const auto&... a) {
        auto once = [&](const auto& x) {
          size_t n = 0;
          ((n += detail::same_row(x, a) ? 1 : 0), ...);
          distinct = distinct && n == 1;
        };
        (once(a), ...);
      },
      t);
  return distinct && std::tuple_size_v<std::remove_cvref_t<decltype(t)>> ==
                         detail::aggregate_member_count<T>();
}

}  // namespace nanovllm
