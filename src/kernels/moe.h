// Mixture-of-experts weights (Qwen3-MoE's sparse MLP), as a backend holds them. The ops that
// use them are Backend::moe_route and Backend::moe_experts (kernels/backend.h).
#pragma once
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "kernels/quantized.h"
#include "util/tensor.h"

namespace nanovllm {

struct MoeExperts {
  int64_t hidden = 0;        // H
  int64_t intermediate = 0;  // I: each expert's (the rank's slice under tensor parallelism)
  std::vector<LinearWeight> gate_up;  // per expert [2I, H]: the gate rows, then the up rows
  std::vector<LinearWeight> down;     // per expert [H, I]
  // Backends that keep dense experts in one allocation (CUDA: its kernels index experts by
  // stride) set these, [E * 2I, H] and [E * H, I], and gate_up[e] / down[e] view their rows.
  Tensor gate_up_all, down_all;
  int64_t num_experts() const { return int64_t(gate_up.size()); }
  size_t nbytes() const {
    size_t n = 0;
    for (const auto& w : gate_up) n += w.nbytes();
    for (const auto& w : down) n += w.nbytes();
    return n;
  }
};

// Gives expert e's host weights, gate_up [2I, H] and down [H, I] (checkpoint dtype), one expert
// at a time, so a backend can place each before the next is read (host memory stays at one
// expert).
using MoeExpertLoader = std::function<std::pair<Tensor, Tensor>(int64_t e)>;

}  // namespace nanovllm
