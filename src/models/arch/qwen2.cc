// Qwen2ForCausalLM (transformers' modeling_qwen2): q/k/v biases always (the config has no switch),
// never an o_proj bias.
#include "models/arch/architecture.h"
#include "models/config_fields.h"
#include "models/model_config.h"

namespace nanovllm {

NANOVLLM_ARCHITECTURE(qwen2) {
  Architecture a;
  a.name = "Qwen2ForCausalLM";
  a.model_type = "qwen2";
  a.default_max_position_embeddings = 32768;
  a.configure = [](const ConfigFields& f, ModelConfig& c) {
    c.qk_norm = false;
    c.attention_bias = true;
    c.o_proj_bias = false;
    if (f.opt_bool("use_sliding_window", false))
      NV_THROW("unsupported 'use_sliding_window' value true in ", f.where,
               " (sliding-window attention is not implemented)");
  };
  a.random_config = [](nlohmann::ordered_json& j, const RandomConfigOptions&) {
    j["attention_bias"] = true;  // informational: Qwen2 reads no such field
    j["max_window_layers"] = j["num_hidden_layers"];
    j["sliding_window"] = nullptr;
    j["use_sliding_window"] = false;
  };
  a.tokenizer = "qwen3";
  return a;
}

}  // namespace nanovllm
