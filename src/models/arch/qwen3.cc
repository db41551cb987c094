// Qwen3ForCausalLM (transformers' modeling_qwen3): per-head q/k RMSNorm before RoPE; biases on
// q/k/v/o only with attention_bias (off in every released Qwen3).
#include "models/arch/architecture.h"
#include "models/config_fields.h"
#include "models/model_config.h"

namespace nanovllm {

NANOVLLM_ARCHITECTURE(qwen3) {
  Architecture a;
  a.name = "Qwen3ForCausalLM";
  a.model_type = "qwen3";
  a.default_max_position_embeddings = 32768;
  a.configure = [](const ConfigFields& f, ModelConfig& c) {
    c.qk_norm = true;
    c.attention_bias = f.opt_bool("attention_bias", false);
    c.o_proj_bias = c.attention_bias;  // bias=config.attention_bias on all four projections
    if (f.opt_bool("use_sliding_window", false))
      NV_THROW("unsupported 'use_sliding_window' value true in ", f.where,
               " (sliding-window attention is not implemented)");
  };
  a.random_config = [](nlohmann::ordered_json& j, const RandomConfigOptions& o) {
    j["attention_bias"] = o.attention_bias;
    j["max_window_layers"] = j["num_hidden_layers"];
    j["sliding_window"] = nullptr;
    j["use_sliding_window"] = false;
  };
  a.tokenizer = "qwen3";
  return a;
}

}  // namespace nanovllm
