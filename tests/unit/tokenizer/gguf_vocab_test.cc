// Tokenizers built from GGUF vocabularies (tokenizer_files_from_gguf, Tokenizer::from_gguf_vocab).
// Small hand-made vocabularies check the rules (byte-level pre-tokenizers and added tokens;
// SentencePiece merges derived from scores, byte fallback, space prefix; defaults) and the
// error cases. With ../shared/data, the real tokenizers are turned into GGUF vocabularies the
// way llama.cpp's converter writes them and must encode and decode every test vector exactly as
// the original tokenizer.json does.
#include "tokenizer/gguf_vocab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace nanovllm {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using V = std::vector<int>;

// clang-format off
enum : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
// clang-format on

// Byte-level: a b c ab abc Ġ (" ") <|end|> (control) <tool> (user-defined); merges (a,b), (ab,c).
GgufVocab tiny_gpt2() {
  GgufVocab v;
  v.model = "gpt2";
  v.pre = "qwen2";
  v.tokens = {"a", "b", "c", "ab", "abc", "\xC4\xA0", "<|end|>", "<tool>"};
  v.token_types = {kNormal, kNormal, kNormal, kNormal, kNormal, kNormal, kControl, kUserDefined};
  v.merges = {"a b", "ab c"};
  v.eos_id = 6;
  return v;
}

// SentencePiece: <unk> <s> </s> <0x41> <0xC3> <0xA9> ▁ a b c ab bc ▁a; the scores of ab and bc
// decide which of them merges first (▁a: -0.5).
GgufVocab tiny_llama(float score_ab, float score_bc) {
  GgufVocab v;
  v.model = "llama";
  const std::string sp = "\xE2\x96\x81";  // ▁
  // clang-format off
  v.tokens = {"<unk>", "<s>", "</s>", "<0x41>", "<0xC3>", "<0xA9>", sp, "a", "b", "c", "ab", "bc", sp + "a"};
  v.token_types = {kUnknown, kControl, kControl, kByte, kByte, kByte, kNormal, kNormal, kNormal, kNormal,
                   kNormal, kNormal, kNormal};
  // clang-format on
  v.scores = {0, 0, 0, 0, 0, 0, -100, -100, -100, -100, score_ab, score_bc, -0.5f};
  return v;
}

std::string error_of(const GgufVocab& v) {
  try {
    tokenizer_files_from_gguf(v, "test.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GgufVocab, ByteLevelEncodeDecode) {
  auto t = Tokenizer::from_gguf_vocab(tiny_gpt2(), "tiny.gguf");
  EXPECT_EQ(t->encode("abc abc"), V({4, 5, 4}));
  EXPECT_EQ(t->encode("ab<|end|>c<tool>"), V({3, 6, 2, 7}));
  EXPECT_EQ(t->decode({4, 5, 4, 6}), "abc abc<|end|>");
  EXPECT_EQ(t->decode({4, 6, 7}, true),
            "abc<tool>");  // control tokens are special, user-defined not
  EXPECT_TRUE(t->is_special(6));
  EXPECT_FALSE(t->is_special(7));
  EXPECT_EQ(t->eos_token(), "<|end|>");
  EXPECT_EQ(t->eos_token_ids(), V({6}));
  EXPECT_EQ(t->bos_token_id(), -1);
  EXPECT_EQ(t->vocab_size(), 8);
  EXPECT_FALSE(t->clean_up_tokenization_spaces());  // qwen2
}

TEST(GgufVocab, ByteLevelConfig) {
  GgufVocab v = tiny_gpt2();
  v.chat_template = "{{ messages }}";
  v.bos_id = 0;
  v.eot_id = 7;
  v.add_bos = true;
  auto t = Tokenizer::from_gguf_vocab(v, "tiny.gguf");
  EXPECT_EQ(t->encode("abc"), V({0, 4}));
  EXPECT_EQ(t->encode("abc", false), V({4}));
  EXPECT_EQ(t->chat_template(), "{{ messages }}");
  EXPECT_EQ(t->eos_token_ids(), V({6, 7}));  // eos, then eot
  // llama-bpe: Llama-3's regex, a BOS unless the file says otherwise, clean-up of spaces.
  v.pre = "llama-bpe";
  v.add_bos.reset();
  t = Tokenizer::from_gguf_vocab(v, "tiny.gguf");
  EXPECT_EQ(t->encode("abc"), V({0, 4}));
  EXPECT_TRUE(t->clean_up_tokenization_spaces());
  v.add_bos = false;
  EXPECT_EQ(Tokenizer::from_gguf_vocab(v, "tiny.gguf")->encode("abc"), V({4}));
  v.add_eos = true;
  EXPECT_EQ(Tokenizer::from_gguf_vocab(v, "tiny.gguf")->encode("abc"), V({4, 6}));
}

// Every supported pre-tokenizer name builds a working tokenizer.
TEST(GgufVocab, PreTokenizerNames) {
  // clang-format off
  const char* names[] = {"", "default", "llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral", "dbrx",
                         "smaug-bpe", "qwen2", "deepseek-r1-qwen", "qwen35", "gpt-2", "gpt2", "phi-2", "mpt",
                         "starcoder", "refact", "codeshell", "smollm", "command-r", "deepseek-coder", "falcon",
                         "tekken", "gpt-4o", "llama4"};
  // clang-format on
  for (const char* pre : names) {
    GgufVocab v = tiny_gpt2();
    v.pre = pre;
    auto t = Tokenizer::from_gguf_vocab(v, "tiny.gguf");
    EXPECT_EQ(t->encode("abc abc", false), V({4, 5, 4})) << pre;
    EXPECT_EQ(t->decode({4, 5, 4}), "abc abc") << pre;
  }
}

// The pre-tokenizers differ on digit runs: Llama-3 splits them in threes, Qwen2 and StarCoder
// into single digits, GPT-2 keeps them whole (then BPE merges), Falcon cuts threes from the left.
TEST(GgufVocab, PreTokenizerDigits) {
  GgufVocab v;
  v.model = "gpt2";
  v.tokens = {"1", "2", "3", "12", "123", "123123"};
  v.merges = {"1 2", "12 3", "123 123"};
  auto enc = [&](const char* pre, const char* text) {
    v.pre = pre;
    return Tokenizer::from_gguf_vocab(v, "digits.gguf")->encode(text, false);
  };
  EXPECT_EQ(enc("llama-bpe", "1231231"), V({4, 4, 0}));
  EXPECT_EQ(enc("qwen2", "1231231"), V({0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(enc("starcoder", "1231231"), V({0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(enc("gpt-2", "1231231"), V({5, 0}));
  EXPECT_EQ(enc("falcon", "1231231"), V({4, 4, 0}));
}

// SentencePiece merges the pair whose result has the highest score, not the leftmost pair.
TEST(GgufVocab, SentencePieceMergeOrderFollowsScores) {
  auto ab_first = Tokenizer::from_gguf_vocab(tiny_llama(-1, -2), "tiny.gguf");
  auto bc_first = Tokenizer::from_gguf_vocab(tiny_llama(-2, -1), "tiny.gguf");
  EXPECT_EQ(ab_first->encode("bca", false), V({6, 11, 7}));  // ▁ bc a
  EXPECT_EQ(ab_first->encode("abc", false), V({12, 11}));    // ▁a (-0.5) beats ab (-1), then bc
  EXPECT_EQ(ab_first->encode("xabc", false), V({6, 0, 10, 9}));  // ▁ <unk> ab c
  EXPECT_EQ(bc_first->encode("xabc", false), V({6, 0, 7, 11}));  // ▁ <unk> a bc
  EXPECT_EQ(bc_first->decode({6, 0, 7, 11}), "<unk>abc");
}

TEST(GgufVocab, SentencePieceDefaultsAndByteFallback) {
  auto t = Tokenizer::from_gguf_vocab(tiny_llama(-1, -2), "tiny.gguf");
  // llama.cpp's defaults: <s> 1, </s> 2, <unk> 0, a BOS, a space prefix.
  EXPECT_EQ(t->bos_token_id(), 1);
  EXPECT_EQ(t->eos_token_ids(), V({2}));
  EXPECT_EQ(t->encode("a"), V({1, 12}));
  // "A" and "é" are not pieces: byte fallback; "ü" has no byte tokens either: <unk>.
  EXPECT_EQ(t->encode("A\xC3\xA9\xC3\xBC", false), V({6, 3, 4, 5, 0}));
  EXPECT_EQ(t->decode({6, 3, 4, 5, 8}),
            "A\xC3\xA9"
            "b");
  EXPECT_EQ(t->decode({1, 12, 6, 8, 2}, true), "a b");
  GgufVocab v = tiny_llama(-1, -2);
  v.add_space_prefix = false;
  v.add_bos = false;
  t = Tokenizer::from_gguf_vocab(v, "tiny.gguf");
  EXPECT_EQ(t->encode("a b"), V({7, 6, 8}));
  EXPECT_EQ(t->decode({7, 6, 8}), "a b");
  EXPECT_EQ(t->decode({6, 8}), " b");  // no prefix to strip
}

// Merges stored in a "llama" file are used as they are (as transformers does).
TEST(GgufVocab, SentencePieceStoredMerges) {
  GgufVocab v = tiny_llama(-1, -2);
  v.scores.clear();
  v.merges = {"b c", "a b"};
  auto t = Tokenizer::from_gguf_vocab(v, "tiny.gguf");
  EXPECT_EQ(t->encode("xabc", false), V({6, 0, 7, 11}));
}

TEST(GgufVocab, Errors) {
  auto expect = [](const GgufVocab& v, std::initializer_list<const char*> needles) {
    std::string e = error_of(v);
    EXPECT_NE(e.find("test.gguf"), std::string::npos) << e;
    for (const char* n : needles)
      EXPECT_NE(e.find(n), std::string::npos) << "'" << n << "' not in: " << e;
  };
  GgufVocab v = tiny_gpt2();
  v.model = "bert";
  expect(v, {"'bert'", "not supported", "tokenizer.json"});
  v = tiny_gpt2();
  v.pre = "my-new-pre";
  expect(v, {"'my-new-pre'", "not supported", "tokenizer.json next to the .gguf"});
  v = tiny_gpt2();
  v.token_types.pop_back();
  expect(v, {"token_type", "7 entries for 8 tokens"});
  v = tiny_llama(-1, -2);
  v.scores.push_back(0);
  expect(v, {"scores", "14 entries for 13 tokens"});
  v = tiny_gpt2();
  v.bos_id = 8;
  expect(v, {"bos_token_id is 8", "8 tokens"});
  v = tiny_gpt2();
  v.eot_id = -1;
  expect(v, {"eot_token_id is -1"});
  v = tiny_gpt2();
  v.merges.push_back("ab zz");
  expect(v, {"merge 2", "'zz'"});
  v = tiny_gpt2();
  v.merges.push_back("c a");  // "ca" is no token
  expect(v, {"merge 2", "'ca'"});
  v = tiny_gpt2();
  v.merges.push_back("abc");
  expect(v, {"merge 2", "not 'left right'"});
  v = tiny_gpt2();
  v.merges.clear();
  expect(v, {"merges is missing"});
  v = tiny_gpt2();
  v.tokens.clear();
  v.token_types.clear();
  expect(v, {"tokens is missing or empty"});
  v = tiny_gpt2();
  v.tokens[5] = "a";
  expect(v, {"tokens 0 and 5", "'a'"});
  v = tiny_gpt2();
  v.tokens[2] = "\xFF";
  expect(v, {"token 2", "UTF-8"});
  v = tiny_gpt2();
  v.token_types[1] = 9;
  expect(v, {"token_type[1] is 9"});
  v = tiny_gpt2();
  v.add_bos = true;
  expect(v, {"add_bos_token", "no bos_token_id"});
  v = tiny_gpt2();
  v.chat_template = "\xC3";
  expect(v, {"chat_template"});
  v = tiny_llama(-1, -2);
  v.scores[8] = std::nanf("");
  expect(v, {"scores[8] is NaN"});
  v = tiny_llama(-1, -2);
  v.scores.clear();
  expect(v, {"needs tokenizer.ggml.scores"});
  // Tokenizer::from_gguf_vocab reports the same errors.
  v = tiny_gpt2();
  v.pre = "my-new-pre";
  EXPECT_THROW(Tokenizer::from_gguf_vocab(v, "test.gguf"), Error);
}

// An empty token keeps its id under llama.cpp's name for it.
TEST(GgufVocab, EmptyToken) {
  GgufVocab v = tiny_gpt2();
  v.tokens.push_back("");
  v.token_types.push_back(kUnused);
  auto t = Tokenizer::from_gguf_vocab(v, "tiny.gguf");
  EXPECT_EQ(t->id_to_token(8), "[EMPTY_8]");
  EXPECT_EQ(t->encode("abc"), V({4}));
}

// ---- Shared data: real tokenizers as GGUF vocabularies ----

std::string data_dir() { return NANOVLLM_SHARED_DATA; }

json load_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

std::string token_name(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const json& x = cfg[key];
  if (x.is_string()) return x.get<std::string>();
  if (x.is_object() && x.contains("content")) return x["content"].get<std::string>();
  return "";
}

// A GGUF vocabulary as llama.cpp's converter writes one from tokenizer.json: tokens by id with
// the added tokens (special ones and ones looking like "<|...|>" are CONTROL, the others
// USER_DEFINED), ids up to `vocab_size` with no token are "[PAD<id>]" (UNUSED). Byte-level
// ("gpt2"): the merges as "a b". SentencePiece ("llama"): <unk> is UNKNOWN, <0xAB> BYTE, and
// no merges but scores that put the pieces in the order of the merges that first make them
// (score -rank); pieces no merge makes score below all of them.
GgufVocab gguf_from_hf(const std::string& dir, const std::string& model, const std::string& pre,
                       int vocab_size) {
  json j = load_json(dir + "/tokenizer.json"), cfg = load_json(dir + "/tokenizer_config.json");
  std::map<int, std::string> by_id;
  for (auto& [tok, id] : j["model"]["vocab"].items()) by_id[id.get<int>()] = tok;
  std::map<int, bool> added_special;
  for (auto& a : j["added_tokens"]) {
    by_id[a["id"].get<int>()] = a["content"].get<std::string>();
    added_special[a["id"].get<int>()] = a["special"].get<bool>();
  }
  GgufVocab v;
  v.model = model;
  v.pre = pre;
  int n = std::max(vocab_size, by_id.rbegin()->first + 1);
  std::map<std::string, int> ids;
  for (int i = 0; i < n; ++i) {
    auto it = by_id.find(i);
    std::string t = it == by_id.end() ? "[PAD" + std::to_string(i) + "]" : it->second;
    int32_t type = kNormal;
    if (it == by_id.end())
      type = kUnused;
    else if (auto a = added_special.find(i); a != added_special.end()) {
      bool looks_special =
          t.size() > 4 && t.rfind("<|", 0) == 0 && t.compare(t.size() - 2, 2, "|>") == 0;
      type = a->second || looks_special ? kControl : kUserDefined;
      if (t == token_name(cfg, "unk_token")) type = kUnknown;
    } else if (model == "llama" && t.size() == 6 && t.rfind("<0x", 0) == 0) {
      type = kByte;
    }
    v.tokens.push_back(t);
    v.token_types.push_back(type);
    ids[t] = i;
  }
  std::vector<std::pair<std::string, std::string>> merges;
  for (auto& m : j["model"]["merges"]) {
    if (m.is_string()) {
      std::string s = m.get<std::string>();
      size_t sp = s.find(' ');
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    }
  }
  if (model == "gpt2") {
    for (auto& [a, b] : merges) v.merges.push_back(a + " " + b);
  } else {
    v.scores.assign(n, 0.0f);
    std::vector<bool> made(n, false);
    for (size_t r = 0; r < merges.size(); ++r) {
      int id = ids.at(merges[r].first + merges[r].second);
      if (!made[id]) v.scores[id] = -static_cast<float>(r);
      made[id] = true;
    }
    for (int i = 0; i < n; ++i)
      if (!made[i] && v.token_types[i] == kNormal) v.scores[i] = -1e6f - static_cast<float>(i);
  }
  auto id_of = [&](const char* key) -> std::optional<int> {
    std::string s = token_name(cfg, key);
    if (s.empty()) return std::nullopt;
    return ids.at(s);
  };
  v.bos_id = id_of("bos_token");
  v.eos_id = id_of("eos_token");
  v.unk_id = id_of("unk_token");
  v.pad_id = id_of("pad_token");
  if (cfg.contains("add_bos_token")) v.add_bos = cfg["add_bos_token"].get<bool>();
  if (cfg.contains("add_eos_token")) v.add_eos = cfg["add_eos_token"].get<bool>();
  if (cfg.contains("chat_template") && cfg["chat_template"].is_string())
    v.chat_template = cfg["chat_template"].get<std::string>();
  return v;
}

void check_vectors(const std::string& vectors, const std::string& dir, const GgufVocab& v) {
  std::string file = data_dir() + "/tokenizer-tests/" + vectors + "_vectors.json";
  auto hf = Tokenizer::from_dir(dir);
  auto gg = Tokenizer::from_gguf_vocab(v, vectors + ".gguf");
  json doc = load_json(file);
  int n = 0;
  for (auto& c : doc["cases"]) {
    std::string text = c["text"].get<std::string>();
    auto ids = c["ids"].get<V>();
    EXPECT_EQ(gg->encode(text, false), ids) << vectors << " text: " << text;
    EXPECT_EQ(gg->encode(text, true), c["ids_with_special_tokens"].get<V>())
        << vectors << " (special) text: " << text;
    EXPECT_EQ(gg->decode(ids), c["decoded"].get<std::string>()) << vectors << " text: " << text;
    EXPECT_EQ(gg->encode(text, true), hf->encode(text, true)) << vectors << " text: " << text;
    ++n;
  }
  EXPECT_GE(n, 80);
  // Special tokens in the text, decoding with and without them.
  std::vector<std::string> extra = {
      "Hello world", " leading space", "tabs\tand\nnew lines\n\n",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\xA6\x99"};
  for (const char* key : {"bos_token", "eos_token"}) {
    std::string s =
        hf->tokenizer_config().contains(key) ? token_name(hf->tokenizer_config(), key) : "";
    if (!s.empty()) extra.push_back(s + "Once upon a time" + s + " x");
  }
  for (const std::string& text : extra) {
    auto ids = hf->encode(text, true);
    EXPECT_EQ(gg->encode(text, true), ids) << vectors << " text: " << text;
    EXPECT_EQ(gg->decode(ids), hf->decode(ids)) << vectors << " text: " << text;
    EXPECT_EQ(gg->decode(ids, true), hf->decode(ids, true)) << vectors << " text: " << text;
  }
  EXPECT_EQ(gg->bos_token_id(), hf->bos_token_id());
  EXPECT_EQ(gg->eos_token(), hf->eos_token());
  EXPECT_EQ(gg->chat_template(), hf->chat_template());
  EXPECT_EQ(gg->clean_up_tokenization_spaces(), hf->clean_up_tokenization_spaces());
}

bool have(const std::string& dir, const std::string& vectors) {
  return fs::exists(dir + "/tokenizer.json") &&
         fs::exists(data_dir() + "/tokenizer-tests/" + vectors + "_vectors.json");
}

TEST(SharedDataGgufVocab, Qwen3) {
  std::string dir = data_dir() + "/tokenizers/qwen3";
  if (!have(dir, "qwen3")) GTEST_SKIP() << "shared data absent: " << dir;
  // config.json's vocab_size 151936: the converter pads with [PAD<id>] tokens.
  GgufVocab v = gguf_from_hf(dir, "gpt2", "qwen2", 151936);
  EXPECT_EQ(v.tokens.size(), 151936u);
  check_vectors("qwen3", dir, v);
}

TEST(SharedDataGgufVocab, Llama3) {
  std::string dir = data_dir() + "/tokenizers/llama3";
  if (!have(dir, "llama3")) GTEST_SKIP() << "shared data absent: " << dir;
  GgufVocab v = gguf_from_hf(dir, "gpt2", "llama-bpe", 0);
  // This tokenizer.json adds no BOS (no TemplateProcessing): the converter writes add_bos false.
  v.add_bos = false;
  check_vectors("llama3", dir, v);
}

TEST(SharedDataGgufVocab, Llama2) {
  std::string dir = data_dir() + "/tokenizers/llama2-hf-generated";
  if (!have(dir, "llama2")) GTEST_SKIP() << "shared data absent: " << dir;
  check_vectors("llama2", dir, gguf_from_hf(dir, "llama", "default", 0));
}

TEST(SharedDataGgufVocab, Stories260K) {
  std::string dir = data_dir() + "/models/stories260K-hf";
  if (!have(dir, "stories260K-tok512")) GTEST_SKIP() << "shared data absent: " << dir;
  check_vectors("stories260K-tok512", dir, gguf_from_hf(dir, "llama", "default", 0));
}

}  // namespace
}  // namespace nanovllm
