// Small helpers shared by the engine unit tests.
#pragma once
#include <memory>
#include <vector>

#include "engine/sequence.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm::test {

inline std::vector<int> iota_tokens(int n, int start) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + i;
  return v;
}

inline std::unique_ptr<Sequence> make_seq(uint64_t id, std::vector<int> prompt, int block_size,
                                          SamplingParams p = {}) {
  return std::make_unique<Sequence>(id, std::move(prompt), p, block_size);
}

}  // namespace nanovllm::test
