// Helpers for the structured-output tests: small vocabularies, full-match checks, a random
// sampler that draws tokens from the masks, and a runner for the Python validators.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/constraints.h"
#include "structured/matcher.h"
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
  std::string text;     // bytes of the accepted tokens
  bool finished = false;  // ended with EOS
  int steps = 0;
};

// Bitmasks of the ids whose bytes contain a closing character (" ] }), and of the one-byte
// ids, per vocabulary.
inline const std::vector<uint32_t>& class_mask(const TokenIndex& v, bool closing) {
  static std::map<std::pair<const TokenIndex*, bool>, std::vector<uint32_t>> cache;
  auto& m = cache[{&v, closing}];
  if (m.empty()) {
    m.assign(v.mask_words(), 0);
    for (int32_t id = 0; id < v.vocab_size(); ++id) {
      const std::string& b = v.bytes(id);
      bool in = closing ? b.find_first_of("\"]}") != std::string::npos : b.size() == 1;
      if (v.in_trie(id) && in) m[id >> 5] |= 1u << (id & 31);
    }
  }
  return m;
}

// The k-th (0-based) set bit of words[0, n).
inline int32_t select_bit(const std::vector<uint32_t>& words, size_t k) {
  for (size_t w = 0; w < words.size(); ++w) {
    size_t c = static_cast<size_t>(__builtin_popcount(words[w]));
    if (k < c) {
      uint32_t b = words[w];
      for (size_t i = 0; i < k; ++i) b &= b - 1;
      return static_cast<int32_t>(w * 32 + __builtin_ctz(b));
    }
    k -= c;
  }
  return -1;
}

inline size_t count_bits(const std::vector<uint32_t>& words) {
  size_t n = 0;
  for (uint32_t w : words) n += static_cast<size_t>(__builtin_popcount(w));
  return n;
}

// Draws tokens from the mask until EOS (or max_steps). To make documents finish, a growing
// share of draws prefers tokens that contain a closing character (" ] }), a third of the rest
// one-byte tokens (which reach a regex's next part), and EOS is taken whenever it is allowed
// after `eos_after` steps. Checks on every step: the mask is never
// empty, and the drawn token is accepted.
inline Sampled sample_document(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937& rng, int max_steps = 4000,
                               int eos_after = 0) {
  GrammarMatcher m(g);
  const TokenIndex& v = g->vocab();
  const std::vector<uint32_t>& closing = class_mask(v, true);
  const std::vector<uint32_t>& short_ids = class_mask(v, false);
  Sampled out;
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<uint32_t> mask(v.mask_words()), closers(v.mask_words()), shorts(v.mask_words());
  for (; out.steps < max_steps; ++out.steps) {
    m.fill_next_token_bitmask(mask.data());
    int32_t eos = -1;
    size_t n_eos = 0;
    for (int32_t e : v.eos_ids())
      if ((mask[e >> 5] >> (e & 31)) & 1u) eos = e, ++n_eos;
    size_t n = count_bits(mask);
    if (n == 0) {
      ADD_FAILURE() << "empty mask (stuck) after: " << out.text;
      return out;
    }
    int32_t pick;
    if (eos >= 0 && (out.steps >= eos_after || n == n_eos)) {
      pick = eos;
    } else {
      for (size_t w = 0; w < mask.size(); ++w) closers[w] = mask[w] & closing[w], shorts[w] = mask[w] & short_ids[w];
      size_t nc = count_bits(closers), ns = count_bits(shorts);
      double bias = std::min(0.9, 0.2 + out.steps / 200.0);
      do {
        if (nc && u(rng) < bias) pick = select_bit(closers, rng() % nc);
        else if (ns && u(rng) < 0.3) pick = select_bit(shorts, rng() % ns);
        else pick = select_bit(mask, rng() % n);
      } while (v.is_eos(pick));
    }
    if (!m.accept_token(pick)) {
      ADD_FAILURE() << "masked-in token " << pick << " rejected after: " << out.text;
      return out;
    }
    if (v.is_eos(pick)) {
      out.finished = true;
      return out;
    }
    out.text += v.bytes(pick);
  }
  return out;
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
