// Helpers for the structured-output tests: small vocabularies, full-match checks, a random
// sampler that draws tokens from the masks, and a runner for the Python validators.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/constraints.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"
#include "structured/random_sampler.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm::structured::testing {

// 256 single-byte tokens (ids 0..255), then `extra` multi-byte tokens, then one EOS id.
inline std::shared_ptr<const TokenIndex> byte_vocab(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  for (auto& e : extra) bytes.push_back(e);
  int32_t eos = static_cast<int32_t>(bytes.size());
  bytes.push_back("");
  return std::make_shared<const TokenIndex>(bytes, std::vector<int32_t>{eos}, std::vector<int32_t>{},
                                            static_cast<int32_t>(bytes.size()) + 5);  // + padding ids
}

// A JSON schema's grammar over byte_vocab().
inline std::shared_ptr<const CompiledGrammar> schema(const std::string& text, JsonSchemaOptions opt = {}) {
  return compile(json_schema_grammar(parse_json_schema(text), opt), byte_vocab());
}

// Whole-text membership: the grammar accepts `text` and may end after it.
inline bool full_match(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.can_end();
}

inline std::string shared_data() { return NANOVLLM_SHARED_DATA; }
inline bool have_qwen3() { return std::ifstream(shared_data() + "/tokenizers/qwen3/tokenizer.json").good(); }

// Qwen3's vocabulary (151669 ids, model width 151936), EOS = <|im_end|>, <|endoftext|>.
inline std::shared_ptr<const TokenIndex> qwen3_vocab() {
  static std::shared_ptr<const TokenIndex> v = [] {
    auto tok = Tokenizer::from_dir(shared_data() + "/tokenizers/qwen3");
    return TokenIndex::from_tokenizer(*tok, {151645, 151643}, 151936);
  }();
  return v;
}

inline std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& mask) {
  std::vector<int32_t> ids;
  for (size_t w = 0; w < mask.size(); ++w)
    for (uint32_t bits = mask[w]; bits; bits &= bits - 1) ids.push_back(static_cast<int32_t>(w * 32 + __builtin_ctz(bits)));
  return ids;
}

struct Sampled {
  std::string text;       // bytes of the accepted tokens
  bool finished = false;  // ended with EOS
  int steps = 0;
};

// structured::sample_random, failing the test when the mask was empty or a token it allowed
// was rejected.
inline Sampled sample_document(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937& rng, int max_steps = 4000,
                               int eos_after = 0) {
  RandomSampleOptions opt;
  opt.max_steps = max_steps;
  opt.eos_after = eos_after;
  RandomSample r = sample_random(g, rng, opt);
  if (!r.error.empty()) ADD_FAILURE() << r.error << " after: " << r.text;
  return {r.text, r.finished, static_cast<int>(r.ids.size())};
}

// Runs tests/unit/structured/validate.py on `cases` (a JSON document written to a temp file)
// with Debian's Python; returns its exit status and output. Status 77 = validator missing.
inline int run_validator(const std::string& cases_json, std::string* output) {
  std::string dir = ::testing::TempDir();
  std::string in = dir + "/structured_cases.json", out = dir + "/structured_validate.txt";
  std::ofstream(in) << cases_json;
  std::string cmd = "/usr/bin/python3 " NANOVLLM_SOURCE_DIR "/tests/unit/structured/validate.py " + in + " > " + out + " 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream f(out);
  output->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace nanovllm::structured::testing
