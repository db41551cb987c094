// MistralForCausalLM (transformers' modeling_mistral): Llama's block without biases, with
// sliding-window attention on every layer when `sliding_window` is set (transformers'
// MistralConfig default 4096 when the field is absent; null: full attention, as in v0.2+).
#include "models/arch/architecture.h"
#include "models/config_fields.h"
#include "models/model_config.h"

namespace nanovllm {

NANOVLLM_ARCHITECTURE(mistral) {
  Architecture a;
  a.name = "MistralForCausalLM";
  a.model_type = "mistral";
  a.default_max_position_embeddings = 4096 * 32;
  a.configure = [](const ConfigFields& f, ModelConfig& c) {
    c.qk_norm = false;
    c.attention_bias = false;
    c.o_proj_bias = false;
    // absent: the config class default; explicit null: no window (has() is false for null).
    const bool absent = !f.j.contains("sliding_window");
    const int window = absent ? 4096 : f.opt_pos_int("sliding_window", 0);
    if (window > 0) c.layer_sliding_window.assign(size_t(c.num_hidden_layers), window);
  };
  a.random_config = [](nlohmann::ordered_json& j, const RandomConfigOptions& o) {
    // tiny: a window well inside the tests' 64-token prompts, so it changes the logits.
    j["sliding_window"] = o.preset == "tiny" ? 16 : 4096;
  };
  a.tokenizer = "llama3";
  return a;
}

}  // namespace nanovllm
