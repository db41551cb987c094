// Host copies of parts of unpacked 4-bit weights (kernels/int4_groups.h), for fusing q/k/v and
// gate/up and for tensor-parallel shards: the Int4Groups counterparts of tensor_ops.h.
#pragma once
#include <string>
#include <vector>

#include "kernels/int4_groups.h"

namespace nanovllm {

// Output rows [begin, begin + count) (column-parallel): codes, scales and zeros of those rows.
Int4Groups int4_rows(const Int4Groups& w, int64_t begin, int64_t count);
// Input features [begin, begin + count) (row-parallel): those codes and g_idx entries; scales
// and zeros stay whole (a group may be cut: its remaining columns keep its scale and zero).
Int4Groups int4_columns(const Int4Groups& w, int64_t begin, int64_t count);
// Stacks parts along N (packed qkv / gate_up). They share one input, hence one gather of it on
// the int4 kernels: K, G and g_idx must be equal (GPTQ act-order gives projections of the same
// input the same g_idx); else an error naming names[0] and the differing part.
Int4Groups int4_concat_rows(const std::vector<Int4Groups>& parts, const std::vector<std::string>& names);

}  // namespace nanovllm
