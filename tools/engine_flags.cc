#include "engine_flags.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <type_traits>

#include "util/check.h"

namespace nanovllm::cli {

namespace {

template <class M>
struct IsVector : std::false_type {};
template <class E>
struct IsVector<std::vector<E>> : std::true_type {};

// CLI11's conversion of one command-line value; a vector field gets one element per value.
template <class M>
bool convert(const std::string& s, M& out) {
  if constexpr (IsVector<M>::value) {
    typename M::value_type e{};
    if (!CLI::detail::lexical_cast(s, e)) return false;
    out = M{e};
    return true;
  } else {
    return CLI::detail::lexical_cast(s, out);
  }
}

// The types a flag can set (compile-time: a row with a flag of another type fails here).
template <class M>
constexpr bool kFlagType =
    std::is_same_v<M, bool> || std::is_arithmetic_v<M> || std::is_same_v<M, std::string> ||
    std::is_same_v<M, std::vector<std::string>> || std::is_same_v<M, std::vector<int>> ||
    std::is_same_v<M, std::optional<uint64_t>> || NamedEnum<M>;

template <HasFields T>
constexpr bool flags_have_flag_types() {
  return std::apply(
      [](const auto&... f) {
        return ((f.flag.empty() || kFlagType<typename std::remove_cvref_t<decltype(f)>::Member>) &&
                ...);
      },
      kFields<T>);
}
static_assert(flags_have_flag_types<Config>() && flags_have_flag_types<SamplingParams>(),
              "a field table row has a flag of a type the CLI cannot set: extend add_flag()");

// One flag for row f of t's table.
template <class T, class M>
void add_flag(CLI::App& app, T& t, const Field<T, M>& f) {
  const std::string names(f.flag), help(f.help), flag(f.primary_flag());
  M& v = t.*f.member;
  // A value breaking the row's rule is an error naming the flag.
  auto check = [f, flag](const M& x) {
    const std::string p = value_problem(f, x);
    if (!p.empty()) throw Error(flag + " " + p);
  };
  if constexpr (std::is_same_v<M, bool>) {
    app.add_flag(v ? names + "{false}" : names, v, help);  // the opposite of the default
  } else if constexpr (std::is_same_v<M, std::vector<int>>) {  // token ids: "1,2,3"
    app.add_option_function<std::string>(
        names, [&v, check](const std::string& s) { check(v = parse_ids(s)); }, help);
  } else if constexpr (std::is_same_v<M, std::optional<uint64_t>>) {
    app.add_option_function<int64_t>(
        names, [&v](int64_t x) { v = x >= 0 ? std::optional<uint64_t>(uint64_t(x)) : std::nullopt; },
        help);  // negative: none
  } else if constexpr (NamedEnum<M>) {
    app.add_option_function<std::string>(
        names,
        [&v, flag](const std::string& s) {
          const std::string p = parse_text(s, v);
          if (!p.empty()) throw Error(flag + " " + p);
        },
        help);
  } else {
    CLI::Option* o = app.add_option(names, v, help);
    if constexpr (std::is_arithmetic_v<M>)
      o->capture_default_str();
    else if constexpr (std::is_same_v<M, std::string>)
      if (!v.empty()) o->capture_default_str();
    o->check(CLI::Validator(
        [check](std::string& s) {
          M x{};
          if (convert(s, x)) check(x);  // a value CLI11 cannot convert is CLI11's error
          return std::string();
        },
        ""));
  }
}

template <HasFields T>
void add_flags(CLI::App& app, T& t, std::initializer_list<std::string_view> only = {}) {
  for_each_field<T>([&](const auto& f) {
    using M = typename std::remove_cvref_t<decltype(f)>::Member;
    if constexpr (kFlagType<M>) {  // (other types have no flag: the static_assert above)
      if (f.flag.empty()) return;
      if (only.size() && std::find(only.begin(), only.end(), f.name) == only.end()) return;
      add_flag(app, t, f);
    }
  });
}

}  // namespace

void add_engine_flags(CLI::App& app, Config& c) {
  add_flags(app, c);
  // Local workers are this same binary's `worker` command.
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) c.worker_command = {exe.string(), "worker"};
}

void add_config_flags(CLI::App& app, Config& c, std::initializer_list<std::string_view> fields) {
  for (std::string_view name : fields) {
    bool found = false;
    for_each_field<Config>([&](const auto& f) { found = found || (f.name == name && !f.flag.empty()); });
    NV_CHECK(found, "Config has no field '", name, "' with a flag");
  }
  add_flags(app, c, fields);
}

void add_sampling_flags(CLI::App& app, SamplingParams& p) { add_flags(app, p); }

std::vector<int> parse_ids(const std::string& s) {
  std::vector<int> ids;
  std::string tok;
  std::stringstream ss(s);
  while (std::getline(ss, tok, ',')) {
    size_t a = tok.find_first_not_of(" \t\n"), b = tok.find_last_not_of(" \t\n");
    NV_CHECK(a != std::string::npos, "empty token id in '", s, "'");
    tok = tok.substr(a, b - a + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(tok, &used);
    } catch (...) {
      used = 0;
    }
    NV_CHECK(used == tok.size() && v >= 0 && v <= INT32_MAX, "invalid token id '", tok, "' in '", s,
             "'");
    ids.push_back(int(v));
  }
  return ids;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  NV_CHECK(f.good(), "cannot open '", path, "'");
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

}  // namespace nanovllm::cli
