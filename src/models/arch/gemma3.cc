// Gemma3ForCausalLM (transformers' modeling_gemma3, the text-only model_type "gemma3_text"):
//  - layers alternate local sliding-window attention and global attention (`layer_types`, or
//    every `sliding_window_pattern`-th layer global); local layers use plain RoPE with
//    rope_local_base_freq, global ones rope_theta with rope_scaling (transformers 5 writes both
//    as rope_parameters keyed by layer type);
//  - RMSNorm multiplies by (1 + w), including the per-head q/k norms;
//  - sandwich norms: post_attention_layernorm on the attention output, pre_feedforward and
//    post_feedforward_layernorm around the MLP;
//  - GELU (tanh) MLP; embeddings scaled by sqrt(hidden_size); softmax scale
//    query_pre_attn_scalar^-0.5; tied embeddings by default.
// Refused: logit soft-capping (Gemma 2's; null in Gemma 3) and bidirectional attention.
// Gemma3ForConditionalGeneration (the multimodal 4B-27B checkpoints) is another architecture.
#include <cmath>
#include <string>

#include "models/arch/architecture.h"
#include "models/config_fields.h"
#include "models/model_config.h"

namespace nanovllm {

namespace {

// Per layer: true = sliding_attention.
std::vector<bool> gemma3_layer_types(const ConfigFields& f, int num_layers) {
  std::vector<bool> sliding(size_t(num_layers), false);
  if (f.has("layer_types")) {
    const nlohmann::json& v = f.j["layer_types"];
    if (!v.is_array() || v.size() != size_t(num_layers))
      NV_THROW("field 'layer_types' in ", f.where, " must be a list of ", num_layers,
               " layer types, got ", v.dump());
    for (size_t l = 0; l < v.size(); ++l) {
      const std::string t = v[l].is_string() ? v[l].get<std::string>() : "";
      if (t != "sliding_attention" && t != "full_attention")
        NV_THROW("unsupported 'layer_types' entry ", v[l].dump(), " in ", f.where,
                 " (supported: sliding_attention, full_attention)");
      sliding[l] = t == "sliding_attention";
    }
    return sliding;
  }
  const int pattern = f.opt_pos_int("sliding_window_pattern", 6);
  for (int l = 0; l < num_layers; ++l) sliding[size_t(l)] = (l + 1) % pattern != 0;
  return sliding;
}

void refuse_if_set(const ConfigFields& f, const char* k, const char* why) {
  if (f.has(k)) NV_THROW("unsupported '", k, "' value ", f.j[k].dump(), " in ", f.where, " (", why, ")");
}

}  // namespace

NANOVLLM_ARCHITECTURE(gemma3) {
  Architecture a;
  a.name = "Gemma3ForCausalLM";
  a.model_type = "gemma3_text";
  a.default_max_position_embeddings = 131072;
  a.configure = [](const ConfigFields& f, ModelConfig& c) {
    c.qk_norm = true;
    c.attention_bias = f.opt_bool("attention_bias", false);
    c.o_proj_bias = c.attention_bias;
    c.norm_weight_offset = true;
    c.sandwich_norm = true;
    c.scale_embeddings = true;
    c.tie_word_embeddings = f.opt_bool("tie_word_embeddings", true);
    if (!f.has("head_dim")) c.head_dim = 256;  // Gemma3TextConfig's default, not hidden / heads
    c.attention_scale = 1.0 / std::sqrt(f.opt_pos_number("query_pre_attn_scalar", 256));
    // Gemma configs name the activation hidden_activation (hidden_act is ignored by transformers).
    c.hidden_act = f.opt_string("hidden_activation", "gelu_pytorch_tanh");
    refuse_if_set(f, "attn_logit_softcapping", "attention logit soft-capping is not implemented");
    refuse_if_set(f, "final_logit_softcapping", "final logit soft-capping is not implemented");
    if (f.opt_bool("use_bidirectional_attention", false))
      NV_THROW("unsupported 'use_bidirectional_attention' value true in ", f.where,
               " (embedding Gemma is not a causal LM)");
    const int window = f.opt_pos_int("sliding_window", 4096);
    const std::vector<bool> sliding = gemma3_layer_types(f, c.num_hidden_layers);
    c.layer_sliding_window.assign(size_t(c.num_hidden_layers), 0);
    for (size_t l = 0; l < sliding.size(); ++l)
      if (sliding[l]) c.layer_sliding_window[l] = window;
    // RoPE: transformers 4 writes rope_theta / rope_scaling for the global layers and
    // rope_local_base_freq for the local ones; transformers 5 a rope_parameters object per
    // layer type (model_config.cc's common parse leaves that form to us).
    c.rope_local_theta = f.opt_pos_number("rope_local_base_freq", 10000.0);
    if (f.has("rope_parameters") && f.j["rope_parameters"].is_object() &&
        (f.j["rope_parameters"].contains("full_attention") ||
         f.j["rope_parameters"].contains("sliding_attention"))) {
      const nlohmann::json& rp = f.j["rope_parameters"];
      if (rp.contains("full_attention"))
        parse_rope_parameters(rp["full_attention"], f.where, "rope_parameters.full_attention", true, c);
      if (rp.contains("sliding_attention")) {
        ModelConfig local;
        local.rope_theta = c.rope_local_theta;
        local.max_position_embeddings = c.max_position_embeddings;
        parse_rope_parameters(rp["sliding_attention"], f.where, "rope_parameters.sliding_attention",
                              true, local);
        if (local.rope_scaling.type != "default")
          NV_THROW("unsupported 'rope_parameters.sliding_attention.rope_type' '", local.rope_scaling.type,
                   "' in ", f.where, " (local layers: default only)");
        c.rope_local_theta = local.rope_theta;
      }
    }
  };
  a.random_config = [](nlohmann::ordered_json& j, const RandomConfigOptions& o) {
    j.erase("hidden_act");
    j["attention_bias"] = o.attention_bias;
    j["attn_logit_softcapping"] = nullptr;
    j["final_logit_softcapping"] = nullptr;
    j["hidden_activation"] = "gelu_pytorch_tanh";
    // tiny (2 layers): one local layer with a window well inside the tests' 64-token prompts,
    // then a global one; a scale unlike 1/sqrt(head_dim) so a wrong scale shows.
    const int layers = j["num_hidden_layers"].get<int>();
    nlohmann::ordered_json types = nlohmann::ordered_json::array();
    for (int l = 0; l < layers; ++l)
      types.push_back(o.preset == "tiny" ? (l % 2 == 0 ? "sliding_attention" : "full_attention")
                                         : ((l + 1) % 6 != 0 ? "sliding_attention" : "full_attention"));
    j["layer_types"] = types;
    j["query_pre_attn_scalar"] = o.preset == "tiny" ? 24 : j["head_dim"].get<int>();
    j["rope_local_base_freq"] = 10000.0;
    j["rope_theta"] = 1000000.0;
    j["sliding_window"] = o.preset == "tiny" ? 16 : 512;
    j["use_bidirectional_attention"] = false;
  };
  a.tokenizer = "llama3";
  return a;
}

}  // namespace nanovllm
