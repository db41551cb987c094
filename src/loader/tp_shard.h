// Weight loading for tensor-parallel linears (vLLM's vocabulary). With world == 1 they are plain.
//  - column-parallel (qkv, gate_up): each rank holds a slice of the OUTPUT features (rows of w);
//    packed QKV: [q_rank; k_rank; v_rank] rows, packed gate_up: [gate_rank; up_rank].
//  - row-parallel (o_proj, down_proj): a slice of the INPUT features (columns of w); the partial
//    outputs are summed across ranks (all-reduce) — bias added once, on rank 0.
//  - vocab-parallel embedding / LM head: rows [rank * V/world, ...) of the vocabulary.
#pragma once
#include <string>
#include <vector>

#include "loader/weight_store.h"

namespace nanovllm {

struct TpInfo {
  int rank = 0;
  int world = 1;
};

// Concatenates the rank's row shards of each named tensor (packed qkv / gate_up); host tensor.
// expected[i] is the full (unsharded) shape of names[i].
Tensor load_column_parallel(const WeightStore& ws, const std::vector<std::string>& names,
                            const std::vector<Shape>& expected, const TpInfo& tp);
// The rank's column slice of a [N, K] weight; host tensor.
Tensor load_row_parallel(const WeightStore& ws, const std::string& name, const Shape& expected,
                         const TpInfo& tp);
// Loads a replicated tensor (norms); zero-copy view into the mapping when possible.
Tensor load_replicated(const WeightStore& ws, const std::string& name, const Shape& expected);

}  // namespace nanovllm
