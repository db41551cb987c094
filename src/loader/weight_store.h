// WeightStore: the tensors of a Hugging Face model directory by name, over its safetensors
// files (model.safetensors, or the shards of model.safetensors.index.json). Tensors point into
// the files' mappings (see safetensors.h for their lifetime). A GPTQ / AWQ checkpoint
// (config.json quantization_config) serves each quantized module X as the tensor X.weight: its
// exact f32 dequantization (loader/int4_checkpoint.h), or unpacked for the int4 kernels (take_int4).
#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "loader/gguf_checkpoint.h"
#include "loader/int4_checkpoint.h"
#include "loader/safetensors.h"

namespace nanovllm {

// All weights of a model directory: model.safetensors, or the shards named by
// model.safetensors.index.json (weight_map), or every *.safetensors file.
class WeightStore {
 public:
  // A directory of safetensors, or a GGUF model (a *.gguf file, its split set, or a directory
  // holding one): gguf_checkpoint.h maps its tensors to HF names.
  static WeightStore open_dir(const std::string& model_dir);
  bool has(const std::string& name) const;
  Tensor get(const std::string& name) const;  // throws "missing tensor 'x' in <dir>"
  // Same, and checks the shape: "tensor 'x' has shape [a, b], expected [c, d]".
  Tensor get(const std::string& name, const Shape& expected) const;
  // A model's load: get(name, expected), and the tensor counts as used (see unused()).
  Tensor take(const std::string& name, const Shape& expected) const;
  std::vector<std::string> names() const;
  // Tensors no take() asked for, in name order. A model checks this after loading: a tensor it
  // did not consume is a checkpoint that does not match its config (llama.cpp's "wrong number of
  // tensors"), e.g. an o_proj.bias the model would silently run without.
  std::vector<std::string> unused() const;
  const std::string& dir() const { return dir_; }
  const GgufCheckpoint* gguf() const { return gguf_.get(); }  // null for safetensors
  // GPTQ / AWQ modules; null for a checkpoint without quantization_config.
  const Int4Checkpoint* int4() const { return int4_.get(); }
  // A weight the int4 / int5 / int6 kernels can hold as stored: a GPTQ / AWQ module's X.weight,
  // or a GGUF Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL or IQ4_XS tensor (GgufCheckpoint::has_int4).
  bool has_int4(const std::string& name) const;
  // Its codes' width: 4 (GPTQ / AWQ, Q4_K, IQ4), 5 (Q5_K, Q5_1), 6 (Q6_K), 3 (Q3_K), 2 (Q2_K: Int4Groups::bits), 0 when not has_int4.
  int int4_bits(const std::string& name) const;
  // Whether its codes index ggml's IQ4_NL table (Int4Groups::iq4_table).
  bool int4_table(const std::string& name) const;
  // Such a weight unpacked (like take(): checks [N, K] and counts it as used).
  Int4Groups take_int4(const std::string& name, const Shape& expected) const;

 private:
  void attach_int4();  // reads config.json's quantization_config, if any
  std::string dir_;
  std::map<std::string, std::shared_ptr<SafetensorsFile>> by_name_;
  std::shared_ptr<GgufCheckpoint> gguf_;
  std::shared_ptr<Int4Checkpoint> int4_;
  mutable std::set<std::string> taken_;
};

}  // namespace nanovllm
