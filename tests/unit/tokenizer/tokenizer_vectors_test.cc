// Shared-data test: every case of /work/shared/data/tokenizer-tests/*_vectors.json (ids recorded
// from two independent JavaScript implementations of HF tokenizers) must encode to exactly the
// recorded ids, with and without special tokens, and decode back to the recorded text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/incremental.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm {
namespace {

namespace fs = std::filesystem;

std::string data_dir() { return NANOVLLM_SHARED_DATA; }

nlohmann::json load_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// Tokenizer folder for each vectors file.
std::string tokenizer_dir_for(const std::string& name) {
  if (name == "qwen3") return data_dir() + "/tokenizers/qwen3";
  if (name == "llama3") return data_dir() + "/tokenizers/llama3";
  if (name == "llama2") return data_dir() + "/tokenizers/llama2-hf-generated";
  if (name == "stories260K-tok512") return data_dir() + "/models/stories260K-hf";
  return "";
}

void run_vectors(const std::string& name) {
  std::string file = data_dir() + "/tokenizer-tests/" + name + "_vectors.json";
  if (!fs::exists(file)) GTEST_SKIP() << "shared data absent: " << file;
  std::string dir = tokenizer_dir_for(name);
  ASSERT_TRUE(fs::exists(dir + "/tokenizer.json")) << dir;
  auto tok = Tokenizer::from_dir(dir);
  auto doc = load_json(file);
  int n = 0;
  for (auto& c : doc["cases"]) {
    std::string text = c["text"].get<std::string>();
    auto ids = c["ids"].get<std::vector<int>>();
    auto ids_sp = c["ids_with_special_tokens"].get<std::vector<int>>();
    EXPECT_EQ(tok->encode(text, false), ids) << name << " text: " << text;
    EXPECT_EQ(tok->encode(text, true), ids_sp) << name << " (special) text: " << text;
    EXPECT_EQ(tok->decode(ids), c["decoded"].get<std::string>()) << name << " text: " << text;
    // Streaming decode gives the same text.
    IncrementalDetokenizer inc(*tok, false);
    std::string streamed;
    for (int id : ids) streamed += inc.push(id);
    streamed += inc.finish();
    EXPECT_EQ(streamed, tok->decode(ids)) << name << " incremental, text: " << text;
    ++n;
  }
  EXPECT_GE(n, 80);
}

TEST(SharedDataTokenizer, Qwen3Vectors) { run_vectors("qwen3"); }
TEST(SharedDataTokenizer, Llama3Vectors) { run_vectors("llama3"); }
TEST(SharedDataTokenizer, Llama2Vectors) { run_vectors("llama2"); }
TEST(SharedDataTokenizer, Stories260KVectors) { run_vectors("stories260K-tok512"); }

// Config-derived properties of the real tokenizers (values from the files' documentation in
// /work/shared/data/README.md and tokenizer_config.json).
TEST(SharedDataTokenizer, ConfigProperties) {
  std::string q = data_dir() + "/tokenizers/qwen3", s = data_dir() + "/models/stories260K-hf";
  if (!fs::exists(q) || !fs::exists(s)) GTEST_SKIP() << "shared data absent: " << data_dir();
  auto qt = Tokenizer::from_dir(q);
  EXPECT_EQ(qt->vocab_size(), 151643 + 26);
  EXPECT_EQ(qt->bos_token_id(), -1);
  EXPECT_EQ(qt->bos_token(), "");
  EXPECT_EQ(qt->eos_token(), "<|im_end|>");
  EXPECT_EQ(qt->eos_token_ids(), std::vector<int>({*qt->token_to_id("<|im_end|>")}));
  EXPECT_NE(qt->chat_template().find("enable_thinking"), std::string::npos);
  EXPECT_TRUE(qt->is_special(*qt->token_to_id("<|im_start|>")));
  EXPECT_FALSE(qt->is_special(*qt->token_to_id("<think>")));
  EXPECT_EQ(qt->tokenizer_config().value("tokenizer_class", ""), "Qwen2Tokenizer");
  // Invalid UTF-8 is read as U+FFFD, like Python's errors="replace".
  EXPECT_EQ(qt->encode("a\xFF\xFE b"), qt->encode("a\xEF\xBF\xBD\xEF\xBF\xBD b"));

  auto st = Tokenizer::from_dir(s);
  EXPECT_EQ(st->vocab_size(), 512);
  EXPECT_EQ(st->bos_token_id(), 1);
  EXPECT_EQ(st->eos_token_ids(), std::vector<int>({2}));  // generation_config.json
  EXPECT_EQ(st->encode("Once", true).front(), 1);
  EXPECT_EQ(st->decode(st->encode("Once upon a time", true), true), "Once upon a time");
}

// Streaming after a prompt: the pushed pieces add exactly what decoding prompt + pushed adds.
TEST(SharedDataTokenizer, IncrementalAfterPrompt) {
  for (std::string dir : {data_dir() + "/models/stories260K-hf", data_dir() + "/tokenizers/qwen3",
                          data_dir() + "/tokenizers/llama2-hf-generated"}) {
    if (!fs::exists(dir)) GTEST_SKIP() << "shared data absent: " << dir;
    auto t = Tokenizer::from_dir(dir);
    auto prompt = t->encode("Once upon a time, there", true);
    auto gen = t->encode(" was a little girl. \xE4\xBD\xA0\xE5\xA5\xBD! \xF0\x9F\xA6\x99 The end.", false);
    auto all = prompt;
    all.insert(all.end(), gen.begin(), gen.end());
    std::string full = t->decode(all, true), head = t->decode(prompt, true);
    ASSERT_EQ(full.compare(0, head.size(), head), 0) << dir;
    IncrementalDetokenizer d(*t, true, prompt);
    std::string out;
    for (int id : gen) out += d.push(id);
    out += d.finish();
    EXPECT_EQ(out, full.substr(head.size())) << dir;
  }
}

}  // namespace
}  // namespace nanovllm
