// LlamaForCausalLM (transformers' modeling_llama): biases on q/k/v/o with attention_bias; an MLP
// bias (mlp_bias) is refused.
#include "models/arch/architecture.h"
#include "models/config_fields.h"
#include "models/model_config.h"

namespace nanovllm {

NANOVLLM_ARCHITECTURE(llama) {
  Architecture a;
  a.name = "LlamaForCausalLM";
  a.model_type = "llama";
  a.default_max_position_embeddings = 2048;
  a.configure = [](const ConfigFields& f, ModelConfig& c) {
    c.qk_norm = false;
    c.attention_bias = f.opt_bool("attention_bias", false);
    c.o_proj_bias = c.attention_bias;
    if (f.opt_bool("mlp_bias", false)) NV_THROW("unsupported 'mlp_bias' value true in ", f.where);
  };
  a.random_config = [](nlohmann::ordered_json& j, const RandomConfigOptions& o) {
    j["attention_bias"] = o.attention_bias;
    j["mlp_bias"] = false;
  };
  a.tokenizer = "llama3";
  return a;
}

}  // namespace nanovllm
