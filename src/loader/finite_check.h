// Load-time check that a checkpoint's floating-point weights are finite. A NaN or Inf weight
// (a corrupt download, a bad conversion) otherwise surfaces as garbage text or NaN logits long
// after loading; here it is an error naming the tensor and the first bad element.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "util/tensor.h"

namespace nanovllm {

class WeightStore;

struct NonFinite {
  int64_t index = 0;  // flat element index of the first non-finite value
  bool is_nan = false;
};

// First non-finite element of a host tensor (F32/F16/BF16; integer tensors have none).
std::optional<NonFinite> find_nonfinite(const Tensor& t);

// Throws nanovllm::Error naming the first tensor (in name order) that holds a NaN or Inf.
void check_finite_weights(const WeightStore& ws);

}  // namespace nanovllm
