// Qwen3MoeForCausalLM (transformers' modeling_qwen3_moe): Qwen3's attention (q/k RMSNorm) with
// a sparse MoE MLP in layer l when l is not in mlp_only_layers and (l + 1) % decoder_sparse_step
// == 0 (the others keep a dense MLP of intermediate_size). Router: softmax over num_experts in
// F32, the top num_experts_per_tok, renormalized when norm_topk_prob; no shared expert.
#include <algorithm>

#include "models/arch/architecture.h"
#include "models/config_fields.h"
#include "models/model_config.h"

namespace nanovllm {

namespace {

// mlp_only_layers: absent / null / a list of layer indices in [0, num_hidden_layers).
std::vector<int> mlp_only_layers(const ConfigFields& f, int num_layers) {
  std::vector<int> out;
  if (!f.has("mlp_only_layers")) return out;
  const nlohmann::json& v = f.j["mlp_only_layers"];
  if (!v.is_array()) NV_THROW("field 'mlp_only_layers' in ", f.where, " must be a list of layer indices, got ", v.dump());
  for (const auto& x : v) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= num_layers)
      NV_THROW("field 'mlp_only_layers' in ", f.where, " must hold layer indices in [0, ", num_layers,
               "), got ", v.dump());
    out.push_back(int(x.get<int64_t>()));
  }
  return out;
}

}  // namespace

NANOVLLM_ARCHITECTURE(qwen3_moe) {
  Architecture a;
  a.name = "Qwen3MoeForCausalLM";
  a.model_type = "qwen3_moe";
  a.default_max_position_embeddings = 32768;
  a.configure = [](const ConfigFields& f, ModelConfig& c) {
    c.qk_norm = true;
    c.attention_bias = f.opt_bool("attention_bias", false);
    c.o_proj_bias = c.attention_bias;
    if (f.opt_bool("use_sliding_window", false))
      NV_THROW("unsupported 'use_sliding_window' value true in ", f.where,
               " (sliding-window attention is not implemented)");
    // transformers' Qwen3MoeConfig defaults: 128 experts, 8 per token, 768 each, no renorm.
    c.num_experts = f.opt_pos_int("num_experts", 128);
    c.num_experts_per_tok = f.opt_pos_int("num_experts_per_tok", 8);
    c.moe_intermediate_size = f.opt_pos_int("moe_intermediate_size", 768);
    c.norm_topk_prob = f.opt_bool("norm_topk_prob", false);
    const int step = f.opt_pos_int("decoder_sparse_step", 1);
    if (c.num_experts_per_tok > c.num_experts)
      NV_THROW("field 'num_experts_per_tok' (", c.num_experts_per_tok, ") exceeds 'num_experts' (",
               c.num_experts, ") in ", f.where);
    const std::vector<int> dense = mlp_only_layers(f, c.num_hidden_layers);
    c.moe_layers.assign(size_t(c.num_hidden_layers), false);
    for (int l = 0; l < c.num_hidden_layers; ++l)
      c.moe_layers[size_t(l)] =
          (l + 1) % step == 0 && std::find(dense.begin(), dense.end(), l) == dense.end();
  };
  a.random_config = [](nlohmann::ordered_json& j, const RandomConfigOptions& o) {
    j["attention_bias"] = o.attention_bias;
    j["decoder_sparse_step"] = 1;
    j["max_window_layers"] = j["num_hidden_layers"];
    // tiny: 8 experts, 2 per token, and layer 1 dense (both MLP kinds in one small model);
    // small: 16 experts, 4 per token; the Qwen3-30B-A3B shapes: 128 experts, 8 per token, 768.
    if (o.preset == "tiny") {
      j["mlp_only_layers"] = {1};
      j["moe_intermediate_size"] = 32;
      j["num_experts"] = 8;
      j["num_experts_per_tok"] = 2;
    } else if (o.preset == "small") {
      j["mlp_only_layers"] = nlohmann::ordered_json::array();
      j["moe_intermediate_size"] = 96;
      j["num_experts"] = 16;
      j["num_experts_per_tok"] = 4;
    } else {
      j["mlp_only_layers"] = nlohmann::ordered_json::array();
      j["moe_intermediate_size"] = 768;
      j["num_experts"] = 128;
      j["num_experts_per_tok"] = 8;
    }
    j["norm_topk_prob"] = true;  // as in Qwen3-30B-A3B
    j["output_router_logits"] = false;
    j["router_aux_loss_coef"] = 0.001;
    j["sliding_window"] = nullptr;
    j["use_sliding_window"] = false;
  };
  a.tokenizer = "qwen3";
  return a;
}

}  // namespace nanovllm
