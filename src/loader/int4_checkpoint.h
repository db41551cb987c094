// The GPTQ / AWQ modules of a safetensors checkpoint (config.json quantization_config, see
// loader/quant_config.h). A quantized linear X stores, instead of X.weight [N, K]:
//
//   GPTQ  X.qweight I32 [K/8, N]   8 codes per int32 along K: bits 4j..4j+3 of row i = k 8i + j
//         X.qzeros  I32 [G, N/8]   8 zero points per int32 along N (nibble j = column 8c + j);
//                                  v1 format stores zero - 1, gptq_v2 the zero
//         X.scales  F16 [G, N]
//         X.g_idx   I32 [K]        group of each input column (k / group_size unless desc_act;
//                                  optional then, required with desc_act)
//   AWQ   X.qweight I32 [K, N/8]   8 codes per int32 along N, interleaved: nibble i holds column
//         X.qzeros  I32 [G, N/8]   8c + {0, 2, 4, 6, 1, 3, 5, 7}[i] (same for the zeros)
//         X.scales  F16 [G, N]     groups are k / group_size
//
// with G = K / group_size (group_size -1: G = 1), and w[n, k] = scale[g, n] * (q[k, n] - zero[g, n]),
// g = g_idx[k] (kernels/int4_groups.h). All shapes and dtypes are checked when the checkpoint is
// opened, g_idx values when a module is unpacked; every error names the file, the tensor and the
// field. WeightStore serves each module as the virtual tensor X.weight (its exact f32
// dequantization) and as Int4Groups for the int4 kernels.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "kernels/int4_groups.h"
#include "loader/quant_config.h"
#include "loader/safetensors.h"

namespace nanovllm {

class Int4Checkpoint {
 public:
  using Files = std::map<std::string, std::shared_ptr<SafetensorsFile>>;  // tensor -> its file
  // Finds every X.qweight in `files` and checks its module's fields. Throws naming the file,
  // tensor and field: a missing qzeros / scales (/ g_idx with desc_act), wrong dtypes or shapes,
  // a group size that does not divide K, a qzeros / scales / g_idx without its qweight.
  Int4Checkpoint(const Int4QuantConfig& config, const Files& files);

  const Int4QuantConfig& config() const { return cfg_; }
  // Is `weight_name` ("X.weight") a quantized module's virtual weight?
  bool has(const std::string& weight_name) const { return modules_.count(weight_name) > 0; }
  // Is `tensor_name` one of the stored fields (X.qweight, X.qzeros, X.scales, X.g_idx)?
  bool is_field(const std::string& tensor_name) const { return fields_.count(tensor_name) > 0; }
  Shape shape(const std::string& weight_name) const;  // [N, K]
  // The virtual X.weight names, sorted.
  std::vector<std::string> weight_names() const;
  // The module's codes, scales, zeros and g_idx (host copies). Throws for a g_idx value outside
  // [0, G), naming the file, tensor and input column.
  Int4Groups unpack(const std::string& weight_name) const;
  // Its exact f32 dequantization [N, K] (f32(scale) * (q - zero): no rounding).
  Tensor dequantize(const std::string& weight_name) const;
  // The stored X.scales [G, N] and its name: the only floats of a module (the NaN/Inf check).
  std::pair<std::string, Tensor> scales(const std::string& weight_name) const;

 private:
  struct Module {
    std::string prefix;  // X
    int64_t N = 0, K = 0, G = 0, group = 0;
    std::shared_ptr<SafetensorsFile> qweight, qzeros, scales, g_idx;  // g_idx may be null
  };
  Int4QuantConfig cfg_;
  std::map<std::string, Module> modules_;  // by "X.weight"
  std::map<std::string, std::string> fields_;  // "X.qzeros" -> "X.weight"
  void check_module(Module& m, const Files& files);
};

// f32 dequantization of unpacked groups: w[n, k] = scales[n, g_idx[k]] * (q[n, k] - zeros[n, g]).
Tensor dequantize_int4(const Int4Groups& w);

}  // namespace nanovllm
