// WeightStore: the tensors of a Hugging Face model directory by name, over its safetensors
// files (model.safetensors, or the shards of model.safetensors.index.json). Tensors point into
// the files' mappings (see safetensors.h for their lifetime).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loader/safetensors.h"

namespace nanovllm {

// All weights of a model directory: model.safetensors, or the shards named by
// model.safetensors.index.json (weight_map), or every *.safetensors file.
class WeightStore {
 public:
  static WeightStore open_dir(const std::string& model_dir);
  bool has(const std::string& name) const;
  Tensor get(const std::string& name) const;  // throws "missing tensor 'x' in <dir>"
  // Same, and checks the shape: "tensor 'x' has shape [a, b], expected [c, d]".
  Tensor get(const std::string& name, const Shape& expected) const;
  std::vector<std::string> names() const;

 private:
  std::string dir_;
  std::map<std::string, std::shared_ptr<SafetensorsFile>> by_name_;
};

}  // namespace nanovllm
