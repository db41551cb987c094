// Rotary embedding table: cos_sin [max_pos, D] F32, row p = [cos(p * f_0..f_{D/2-1}),
// sin(p * f_0..f_{D/2-1})] (times YaRN's attention factor), computed in f64 from the (scaled)
// inverse frequencies.
#pragma once
#include "models/model_config.h"
#include "util/tensor.h"

namespace nanovllm {

Tensor make_cos_sin_table(const ModelConfig& c, int max_pos);

}  // namespace nanovllm
