// Host-side copies used when mapping checkpoint tensors onto the engine's layout: fusing
// q/k/v or gate/up projections (concat_rows), tensor-parallel slices (shard_dim) and dtype
// conversion (to_dtype). All return fresh, contiguous host tensors.
#pragma once
#include <vector>

#include "util/tensor.h"

namespace nanovllm {

Tensor concat_rows(const std::vector<Tensor>& parts);            // along dim 0, same dtype
Tensor shard_dim(const Tensor& t, int dim, int rank, int world);  // contiguous slice of dim 0 or 1
Tensor to_dtype(const Tensor& t, DType dtype);                    // host float conversion

}  // namespace nanovllm
