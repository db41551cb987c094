#include "structured/random_sampler.h"

#include <algorithm>
#include <chrono>

#include "structured/matcher.h"

namespace nanovllm::structured {

namespace {

// Ids whose bytes contain a closing character (closing) or are one byte long (!closing).
std::vector<uint32_t> class_mask(const TokenIndex& v, bool closing) {
  std::vector<uint32_t> m(v.mask_words(), 0);
  for (int32_t id = 0; id < v.vocab_size(); ++id) {
    const std::string& b = v.bytes(id);
    bool in = closing ? b.find_first_of("\"]}") != std::string::npos : b.size() == 1;
    if (v.in_trie(id) && in) m[id >> 5] |= 1u << (id & 31);
  }
  return m;
}

size_t count_bits(const std::vector<uint32_t>& w) {
  size_t n = 0;
  for (uint32_t x : w) n += static_cast<size_t>(__builtin_popcount(x));
  return n;
}

// The k-th (0-based) set bit.
int32_t select_bit(const std::vector<uint32_t>& words, size_t k) {
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

}  // namespace

RandomSample sample_random(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937& rng,
                           const RandomSampleOptions& opt) {
  const TokenIndex& v = g->vocab();
  std::vector<uint32_t> closing = class_mask(v, true), short_ids = class_mask(v, false);
  std::vector<uint32_t> mask(v.mask_words()), closers(v.mask_words()), shorts(v.mask_words());
  std::uniform_real_distribution<double> u(0, 1);
  GrammarMatcher m(g);
  RandomSample out;
  for (int step = 0; step < opt.max_steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    m.fill_next_token_bitmask(mask.data());
    out.mask_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    int32_t eos = -1;
    size_t n_eos = 0;
    for (int32_t e : v.eos_ids())
      if ((mask[e >> 5] >> (e & 31)) & 1u) eos = e, ++n_eos;
    size_t n = count_bits(mask);
    if (n == 0) {
      out.error = "empty mask (stuck)";
      return out;
    }
    int32_t pick;
    if (eos >= 0 && (step >= opt.eos_after || n == n_eos)) {
      pick = eos;
    } else {
      for (size_t w = 0; w < mask.size(); ++w) closers[w] = mask[w] & closing[w], shorts[w] = mask[w] & short_ids[w];
      size_t nc = count_bits(closers), ns = count_bits(shorts);
      double bias = std::min(0.9, 0.2 + step / 200.0);
      do {
        if (nc && u(rng) < bias) pick = select_bit(closers, rng() % nc);
        else if (ns && u(rng) < 0.3) pick = select_bit(shorts, rng() % ns);
        else pick = select_bit(mask, rng() % n);
      } while (v.is_eos(pick));
    }
    if (!m.accept_token(pick)) {
      out.error = "masked-in token " + std::to_string(pick) + " rejected";
      return out;
    }
    out.ids.push_back(pick);
    if (v.is_eos(pick)) {
      out.finished = true;
      return out;
    }
    out.text += v.bytes(pick);
  }
  return out;
}

}  // namespace nanovllm::structured
