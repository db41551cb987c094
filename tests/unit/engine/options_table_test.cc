// The field tables (nanovllm/field.h) against what is documented and what resolve() does with
// them: the README's flag paragraph lists exactly the flags the tables give the CLI, the Python
// README names every Python keyword, every choice of a string field is one resolve() parses,
// and every `auto` is settled.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "engine/config_json.h"
#include "kernels/kv_cache_int8.h"
#include "engine/resolved_config.h"
#include "kernels/quantized.h"
#include "nanovllm/config.h"
#include "nanovllm/sampling_params.h"
#include "util/check.h"

namespace nanovllm {
namespace {

using ::testing::HasSubstr;

std::string read_source(const std::string& rel) {
  std::ifstream f(std::string(NANOVLLM_SOURCE_DIR) + "/" + rel);
  EXPECT_TRUE(f.good()) << rel;
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

// The primary flags of T's rows that have one.
template <class T>
std::set<std::string> table_flags() {
  std::set<std::string> out;
  for_each_field<T>([&](const auto& f) {
    if (!f.flag.empty()) out.insert(std::string(f.primary_flag()));
  });
  return out;
}

std::set<std::string> backticked_flags(const std::string& text) {
  std::set<std::string> out;
  static const std::regex re("`(--[a-z][a-z0-9-]*)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1]);
  return out;
}

// README.md's "Engine flags (generate, bench, serve): ... Sampling flags: ..." paragraph
// (tests/e2e/test_documented_flags.py runs each flag it names).
TEST(OptionsTable, ReadmeDocumentsExactlyTheTablesFlags) {
  const std::string readme = read_source("README.md");
  const std::string head = "Engine flags (generate, bench, serve):";
  const size_t begin = readme.find(head);
  ASSERT_NE(begin, std::string::npos) << "README.md has no '" << head << "' paragraph";
  const size_t end = readme.find("\n\n", begin);
  const std::string para = readme.substr(begin, end - begin);
  const size_t split = para.find("Sampling flags:");
  ASSERT_NE(split, std::string::npos);
  EXPECT_EQ(backticked_flags(para.substr(0, split)), table_flags<Config>())
      << "README.md's engine flags differ from fields_of(const Config*)'s";
  EXPECT_EQ(backticked_flags(para.substr(split)), table_flags<SamplingParams>())
      << "README.md's sampling flags differ from fields_of(const SamplingParams*)'s";
}

// python/README.md names every keyword of Config (as `name`) and SamplingParams (as name=...
// in its signature), and every BackendOptions field.
TEST(OptionsTable, PythonReadmeNamesEveryKeyword) {
  const std::string readme = read_source("python/README.md");
  for_each_field<Config>([&](const auto& f) {
    EXPECT_THAT(readme, HasSubstr("`" + std::string(f.name) + "`")) << "Config." << f.name;
  });
  for_each_field<SamplingParams>([&](const auto& f) {
    EXPECT_THAT(readme, HasSubstr(std::string(f.name) + "=")) << "SamplingParams." << f.name;
  });
  for_each_field<BackendOptions>([&](const auto& f) {
    EXPECT_THAT(readme, HasSubstr(std::string(f.name) + "=")) << "BackendOptions." << f.name;
  });
}

TEST(OptionsTable, FlagsAndNamesAreUnique) {
  std::set<std::string> flags;
  for_each_field<Config>([&](const auto& f) {
    if (!f.flag.empty()) {
      EXPECT_TRUE(flags.insert(std::string(f.primary_flag())).second) << f.flag;
    }
  });
  for_each_field<SamplingParams>([&](const auto& f) {
    if (!f.flag.empty()) {
      EXPECT_TRUE(flags.insert(std::string(f.primary_flag())).second) << f.flag;
    }
  });
}

// Every choice a string field accepts is one resolve() understands.
TEST(OptionsTable, ResolveTakesEveryChoice) {
  for (std::string_view q : kQuantizationChoices) {
    if (q == "auto") {  // needs the model: resolve() settles it (none for safetensors)
      Config c;
      c.quantization = "auto";
      EXPECT_FALSE(resolve(c).quantization.enabled());
      continue;
    }
    EXPECT_NO_THROW(parse_quant_scheme(std::string(q))) << q;
  }
  auto with = [](auto set) {
    Config c;
    set(c);
    return resolve(c);
  };
  EXPECT_EQ(with([](Config& c) { c.device = "cpu"; }).device, Device::CPU);
  EXPECT_EQ(with([](Config& c) { c.device = "cuda"; }).device, Device::CUDA);
  EXPECT_EQ(with([](Config& c) { c.device = "cuda"; }).kv_cache_dtype, DType::BF16);
  EXPECT_EQ(with([](Config& c) { c.policy = "mixed"; }).policy, SchedulePolicy::kMixed);
  EXPECT_EQ(with([](Config& c) { c.policy = "prefill-first"; }).policy,
            SchedulePolicy::kPrefillFirst);
  for (std::string_view q : kLmHeadQuantizationChoices) {
    if (q == "int6-g16-k" || q == "int5-g32-zp-k" || q == "int5-g32-zp" || q == "int5-g32-zp-f32" || q == "int3-g16-k" ||
        q == "int2-g16-zp-k") {  // a GGUF's own Q6_K / Q5_K / Q5_1 / Q3_K / Q2_K head: no model here
      try {
        with([&](Config& c) { c.lm_head_quantization = std::string(q); });
        ADD_FAILURE() << q << " resolved without a GGUF model";
      } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("LM head as stored, on the CPU")) << q;
      }
      continue;  // tests/python/test_gguf_model.py takes it with a Q4_K_M file
    }
    const ResolvedConfig r = with([&](Config& c) {
      c.quantization = "int4";
      c.lm_head_quantization = std::string(q);
    });
    EXPECT_EQ(r.lm_head_quantization.str(),
              q == "auto" ? "int8" : parse_quant_scheme(std::string(q)).str());
  }
  EXPECT_EQ(with([](Config& c) { c.kv_cache_dtype = "f32"; }).kv_cache_dtype, DType::F32);
  EXPECT_EQ(with([](Config& c) { c.kv_cache_dtype = "bf16"; }).kv_cache_dtype, DType::BF16);
  EXPECT_EQ(with([](Config& c) { c.kv_cache_dtype = "int8"; }).kv_cache_dtype, kKvCacheInt8);
  EXPECT_EQ(with([](Config& c) { c.kv_cache_dtype = "int8"; }).settled().kv_cache_dtype, "int8");
  EXPECT_EQ(with([](Config& c) { c.device = "cpu"; }).kv_cache_dtype, DType::F32);
}

// After resolve() nothing is left `auto`; settled() reports what each became.
TEST(OptionsTable, ResolveSettlesEveryAuto) {
  Config c;
  c.device = "cpu";
  c.num_threads = 0;
  c.backend.num_threads = 0;
  c.tensor_parallel_size = 2;
  c.dist_timeout_s = 1.5f;
  const ResolvedConfig r = resolve(c);
  EXPECT_GE(r.num_threads, 1);
  EXPECT_EQ(r.dist_timeout.count(), 1500);
  const Config s = r.settled();
  EXPECT_EQ(s.device, "cpu");
  EXPECT_EQ(s.kv_cache_dtype, "f32");
  EXPECT_EQ(s.lm_head_quantization, "none");
  EXPECT_NO_THROW(s.validate());  // settled values are valid inputs
  c.num_threads = 3;
  EXPECT_EQ(resolve(c).num_threads, 3);
  c.num_threads = 0;
  c.backend.num_threads = 5;
  EXPECT_EQ(resolve(c).num_threads, 5);
  c.kv_cache_dtype = "f16";
  try {
    resolve(c);
    FAIL() << "resolved kv_cache_dtype f16";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("kv_cache_dtype must be auto, f32, bf16 or int8, got 'f16'"));
  }
}

// The JSON rank 0 sends has one key per row (nested tables as objects, enums by name), and a
// worker refuses a key it does not know or a missing one.
TEST(OptionsTable, ConfigJsonFollowsTheTable) {
  const std::string j = config_to_json(Config{});
  for_each_field<Config>([&](const auto& f) {
    EXPECT_THAT(j, HasSubstr("\"" + std::string(f.name) + "\":")) << f.name;
  });
  EXPECT_THAT(j, HasSubstr("\"linear_path\":\"auto\""));
  std::string unknown = j;
  unknown.insert(1, "\"some_future_field\":1,");
  try {
    config_from_json(unknown);
    FAIL() << "accepted an unknown field";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown field 'some_future_field'"));
  }
  std::string missing = j;
  const size_t at = missing.find("\"max_waiting\":0,");
  ASSERT_NE(at, std::string::npos);
  missing.erase(at, std::string("\"max_waiting\":0,").size());
  EXPECT_THROW(config_from_json(missing), Error);
  std::string bad_enum = j;
  const size_t lp = bad_enum.find("\"linear_path\":\"auto\"");
  bad_enum.replace(lp, std::string("\"linear_path\":\"auto\"").size(), "\"linear_path\":\"fast\"");
  try {
    config_from_json(bad_enum);
    FAIL() << "accepted linear_path fast";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("backend.linear_path must be auto, streaming, blas or onednn"));
  }
}

template <class M>
struct IsVector : std::false_type {};
template <class E>
struct IsVector<std::vector<E>> : std::true_type {};
template <class>
[[maybe_unused]] constexpr bool kUnhandled = false;  // clang: used only in static_assert

// A value of M other than v (any value: the JSON carries what it is given, unchecked).
template <class M>
M other_than(const M& v) {
  if constexpr (std::is_same_v<M, bool>) {
    return !v;
  } else if constexpr (NamedEnum<M>) {
    return static_cast<M>((static_cast<size_t>(v) + 1) % enum_names(M{}).size());
  } else if constexpr (std::is_arithmetic_v<M>) {
    return M(v + 3);
  } else if constexpr (std::is_same_v<M, std::string>) {
    return v + "x";
  } else if constexpr (IsVector<M>::value) {
    M o = v;
    o.push_back(other_than(typename M::value_type{}));
    return o;
  } else {
    static_assert(kUnhandled<M>, "a Config field of a new type: teach other_than()");
  }
}

// Every row of Config's table (and of the nested BackendOptions'), changed alone, reaches the
// JSON and comes back: a worker receives every field rank 0 has, with no list to keep.
TEST(OptionsTable, ConfigJsonRoundTripsEveryRow) {
  const std::string defaults = config_to_json(Config{});
  int rows = 0;
  auto check = [&](const Config& c, const Config& back, const std::string& name, bool same) {
    EXPECT_NE(config_to_json(c), defaults) << name << " is not in the JSON";
    EXPECT_TRUE(same) << name << " did not come back from the JSON";
    EXPECT_EQ(config_to_json(back), config_to_json(c)) << name;
    ++rows;
  };
  for_each_field<Config>([&](const auto& f) {
    using M = typename std::remove_cvref_t<decltype(f)>::Member;
    if constexpr (HasFields<M>) {
      for_each_field<M>([&](const auto& g) {
        Config c;
        (c.*f.member).*g.member = other_than((c.*f.member).*g.member);
        const Config back = config_from_json(config_to_json(c));
        check(c, back, std::string(f.name) + "." + std::string(g.name),
              (back.*f.member).*g.member == (c.*f.member).*g.member);
      });
    } else {
      Config c;
      c.*f.member = other_than(c.*f.member);
      const Config back = config_from_json(config_to_json(c));
      check(c, back, std::string(f.name), back.*f.member == c.*f.member);
    }
  });
  EXPECT_EQ(rows, int(std::tuple_size_v<decltype(kFields<Config>)>) - 1 +
                      int(std::tuple_size_v<decltype(kFields<BackendOptions>)>));
}

TEST(OptionsTable, ValidateNamesTheField) {
  SamplingParams p;
  p.top_p = 0;
  try {
    p.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("top_p must be in (0, 1], got 0"));
  }
  Config c;
  c.backend.spin_us = -1;
  try {
    c.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("backend spin_us must be >= 0, got -1"));
  }
}

}  // namespace
}  // namespace nanovllm
