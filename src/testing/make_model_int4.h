// make-model --format gptq|awq: the linear projections of a random model written as a real
// GPTQ / AWQ checkpoint (loader/int4_checkpoint.h has the layouts), quantized round-to-nearest
// from the f32 weights the dense model of the same seed holds (GPTQ's own error feedback is not
// needed: the format is what is tested, and RTN is an honest GPTQ-format quantization).
//   GPTQ: per group of input features, xmin = min(0, w), xmax = max(0, w); symmetric: xmax =
//         max(|xmin|, xmax), xmin = -xmax, zero 8; scale = (xmax - xmin) / 15 (rounded to f16),
//         zero = round(-xmin / scale); q = clamp(round(w / scale) + zero, 0, 15). desc_act: the
//         input features are visited in a random order (one per input: q/k/v share theirs, as
//         GPTQ's shared Hessian makes them) and group i holds visits i*group .. (i+1)*group-1.
//   AWQ:  scale = (max - min) / 15 (at least 1e-5), zero = clamp(-round(min / scale), 0, 15),
//         q as above (AutoAWQ's zero-point quantizer).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loader/safetensors_writer.h"
#include "util/tensor.h"

namespace nanovllm {

struct Int4WriteOptions {
  std::string format;                      // gptq | awq
  int group_size = 128;                    // -1: one group over all input features
  bool sym = true;                         // gptq
  bool desc_act = false;                   // gptq
  std::string checkpoint_format = "gptq";  // gptq (v1: stores zero - 1) | gptq_v2
};

// Throws naming the option for a bad combination (awq with --asym/--desc-act, ...).
void check_int4_write_options(const Int4WriteOptions& o);
// Is checkpoint tensor `name` a linear projection the format quantizes ("....q_proj.weight",
// experts' gate/up/down)? Embeddings, norms, the router and lm_head stay dense.
bool is_int4_linear(const std::string& name);
// The stored tensors replacing X.weight [N, K]: X.qweight, X.qzeros, X.scales (+ X.g_idx, GPTQ).
std::vector<TensorSpec> int4_tensor_specs(const std::string& weight_name, const Shape& shape,
                                          const Int4WriteOptions& o);
// Quantizes w [N, K] (f32, row-major) and returns each stored tensor by its full name.
std::vector<std::pair<std::string, Tensor>> quantize_int4_tensors(const std::string& weight_name,
                                                                  const float* w, int64_t N, int64_t K,
                                                                  const Int4WriteOptions& o, uint64_t seed);
// config.json's quantization_config for these options.
nlohmann::ordered_json int4_quantization_config(const Int4WriteOptions& o);

}  // namespace nanovllm
