// Weight loading for tensor-parallel linears (vLLM's vocabulary). With world == 1 they are plain.
//  - column-parallel (qkv, gate_up): each rank holds a slice of the OUTPUT features (rows of w);
//    packed QKV: [q_rank; k_rank; v_rank] rows, packed gate_up: [gate_rank; up_rank]. Each part
//    has its own row range (KV heads may be replicated: models/tp_shard.h).
//  - row-parallel (o_proj, down_proj): a slice of the INPUT features (columns of w); the partial
//    outputs are summed across ranks (all-reduce) — a bias would be added once, on rank 0.
//  - vocab-parallel embedding / LM head: rows [begin, begin + rows) of the vocabulary, zero
//    padded past the end of the vocabulary.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "loader/weight_store.h"

namespace nanovllm {

struct TpInfo {
  int rank = 0;
  int world = 1;
};

// Rows [begin, begin + count) of a tensor's dimension 0.
struct RowRange {
  int64_t begin = 0;
  int64_t count = 0;
};

// Concatenates rows[i] of each named tensor (packed qkv / gate_up); host tensor. expected[i] is
// the full (unsharded) shape of names[i]; an empty `rows` takes every tensor whole.
Tensor load_column_parallel(const WeightStore& ws, const std::vector<std::string>& names,
                            const std::vector<Shape>& expected, const std::vector<RowRange>& rows);
// The rank's column slice of a [N, K] weight; host tensor.
Tensor load_row_parallel(const WeightStore& ws, const std::string& name, const Shape& expected,
                         const TpInfo& tp);
// Rows [begin, begin + rows) of a [V, H] table, rows past V zero; whole (a view) when they
// cover exactly [0, V).
Tensor load_vocab_parallel(const WeightStore& ws, const std::string& name, const Shape& expected,
                           int64_t begin, int64_t rows);
// Loads a replicated tensor (norms); zero-copy view into the mapping when possible.
Tensor load_replicated(const WeightStore& ws, const std::string& name, const Shape& expected);

// GPTQ / AWQ (loader/int4_checkpoint.h): the same slices of quantized modules, unpacked for the
// int4 kernels (loader/int4_slice.h). nullopt when not every named weight is a quantized module:
// the dense loaders above then serve each part (a quantized one as its exact dequantization).
std::optional<Int4Groups> load_column_parallel_int4(const WeightStore& ws, const std::vector<std::string>& names,
                                                    const std::vector<Shape>& expected,
                                                    const std::vector<RowRange>& rows);
// Rows [begin, begin + rows) of a [V, H] table (the LM head), rows past V zero.
std::optional<Int4Groups> load_vocab_parallel_int4(const WeightStore& ws, const std::string& name,
                                                   const Shape& expected, int64_t begin, int64_t rows);
std::optional<Int4Groups> load_row_parallel_int4(const WeightStore& ws, const std::string& name,
                                                 const Shape& expected, const TpInfo& tp);

}  // namespace nanovllm
