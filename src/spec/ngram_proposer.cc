#include "spec/ngram_proposer.h"

#include <algorithm>

#include "engine/sequence.h"
#include "util/check.h"

namespace nanovllm {

NgramProposer::NgramProposer(int ngram_min, int ngram_max)
    : ngram_min_(ngram_min), ngram_max_(ngram_max) {
  NV_CHECK(ngram_min >= 1 && ngram_min <= ngram_max, "ngram_min ", ngram_min, ", ngram_max ",
           ngram_max);
}

void NgramProposer::propose(std::span<const DraftRequest> requests) {
  for (const DraftRequest& r : requests) propose_one(r.seq->token_ids, r.max_tokens, *r.out);
}

void NgramProposer::propose_one(std::span<const int> tokens, int max_tokens,
                                std::vector<int>& out) const {
  out.clear();
  const int64_t len = int64_t(tokens.size());
  if (max_tokens <= 0) return;
  for (int64_t n = std::min<int64_t>(ngram_max_, len - 1); n >= ngram_min_; --n) {
    const int* suffix = tokens.data() + (len - n);
    // Most recent occurrence first: the suffix itself (at len - n) is excluded, so a match
    // ends at most at len - 1 and at least one token follows it.
    for (int64_t j = len - n - 1; j >= 0; --j) {
      if (tokens[size_t(j + n - 1)] != suffix[n - 1] || !std::equal(suffix, suffix + n, tokens.data() + j))
        continue;
      // Copy what followed; past the end, the draft continues itself (period len - n - j).
      for (int64_t i = 0; i < max_tokens; ++i) {
        const int64_t src = j + n + i;
        out.push_back(src < len ? tokens[size_t(src)] : out[size_t(src - len)]);
      }
      return;
    }
  }
}

}  // namespace nanovllm
