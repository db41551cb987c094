// models/pooling_config: sentence-transformers' modules.json + 1_Pooling/config.json -> the
// pooling mode and normalization; malformed or unsupported files are errors naming them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "models/pooling_config.h"
#include "util/check.h"

namespace nanovllm {
namespace {

namespace fs = std::filesystem;

struct Dir {
  fs::path p = fs::temp_directory_path() / ("nv_pooling_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Dir() { fs::create_directories(p / "1_Pooling"); }
  ~Dir() { fs::remove_all(p); }
  void write(const std::string& rel, const std::string& text) const { std::ofstream(p / rel) << text; }
};

const char* kModules =
    R"([{"idx":0,"path":"","type":"sentence_transformers.models.Transformer"},
        {"idx":1,"path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
        {"idx":2,"path":"2_Normalize","type":"sentence_transformers.models.Normalize"}])";

TEST(PoolingConfig, ReadsModeAndNormalize) {
  Dir d;
  EXPECT_FALSE(PoolingConfig::from_dir(d.p.string()));  // no modules.json: not an embedding model
  d.write("modules.json", kModules);
  for (const auto& [key, name] : {std::pair{"pooling_mode_lasttoken", "last"}, {"pooling_mode_mean_tokens", "mean"},
                                  {"pooling_mode_cls_token", "cls"}}) {
    d.write("1_Pooling/config.json", std::string("{\"") + key + "\": true}");
    auto pc = PoolingConfig::from_dir(d.p.string());
    ASSERT_TRUE(pc) << key;
    EXPECT_STREQ(pc->mode_name(), name);
    EXPECT_TRUE(pc->normalize);
  }
  d.write("modules.json", R"([{"path":"1_Pooling","type":"sentence_transformers.models.Pooling"}])");
  EXPECT_FALSE(PoolingConfig::from_dir(d.p.string())->normalize);
}

TEST(PoolingConfig, BadFilesAreNamedErrors) {
  Dir d;
  auto error = [&] {
    try {
      (void)PoolingConfig::from_dir(d.p.string());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  d.write("modules.json", kModules);
  d.write("1_Pooling/config.json", R"({"pooling_mode_max_tokens": true})");
  EXPECT_NE(error().find("pooling mode not supported"), std::string::npos) << error();
  d.write("modules.json", "{not json");
  EXPECT_NE(error().find("modules.json"), std::string::npos) << error();
  d.write("modules.json", R"([{"path":"../../etc","type":"sentence_transformers.models.Pooling"}])");
  EXPECT_NE(error().find("leaves the model folder"), std::string::npos) << error();
  d.write("modules.json", R"([{"path":"1_Pooling"}])");
  EXPECT_NE(error().find("\"type\""), std::string::npos) << error();
}

}  // namespace
}  // namespace nanovllm
