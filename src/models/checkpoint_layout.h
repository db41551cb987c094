// The tensors a checkpoint of a ModelConfig holds (HF names from its architecture's TensorNames,
// full unsharded shapes), in file order: what make-model writes and what the decoder consumes.
// The decoder's loader and this list must agree: make-model + the loader's strictness check (every
// tensor used) fail any test on a model whose list and loader differ.
#pragma once
#include <string>
#include <vector>

#include "models/model_config.h"
#include "util/tensor.h"

namespace nanovllm {

struct CheckpointTensor {
  std::string name;
  Shape shape;
};

// tie_word_embeddings: no lm_head.weight.
std::vector<CheckpointTensor> checkpoint_tensors(const ModelConfig& c);

// "model.layers.<l>.<name>.<suffix>" with the architecture's layer prefix.
std::string layer_tensor(const ModelConfig& c, int layer, const std::string& name, const char* suffix = "weight");
// "model.layers.<l>.mlp.experts.<e>.<name>.weight": expert e's weight in an MoE layer.
std::string expert_tensor(const ModelConfig& c, int layer, int64_t expert, const std::string& name);

}  // namespace nanovllm
