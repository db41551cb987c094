// Draws random allowed tokens under a constraint until EOS: a stand-in for a model, used by the
// tests (every document must validate) and bench_structured_mask (mask time per token).
//
// Uniform draws over the mask would rarely finish (inside a JSON string almost every token is
// allowed and few close it), so a growing share of draws prefers tokens containing a closing
// character (" ] }), a third of the rest one-byte tokens (which reach a regex's next part), and
// EOS is taken whenever allowed after `eos_after` steps.
#pragma once
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "structured/compiled_grammar.h"

namespace nanovllm::structured {

struct RandomSampleOptions {
  int max_steps = 4000;
  int eos_after = 0;
};

struct RandomSample {
  std::string text;            // bytes of the accepted tokens (EOS excluded)
  std::vector<int32_t> ids;    // accepted tokens, EOS included when finished
  bool finished = false;       // ended with EOS
  std::string error;           // "" or what went wrong: an empty mask, a masked-in token rejected
  std::vector<double> mask_seconds;  // time of each fill_next_token_bitmask call
};

RandomSample sample_random(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937& rng,
                           const RandomSampleOptions& opt = {});

}  // namespace nanovllm::structured
