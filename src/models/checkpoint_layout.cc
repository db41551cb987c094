#include "models/checkpoint_layout.h"

#include "models/arch/architecture.h"
#include "util/check.h"

namespace nanovllm {

std::string layer_tensor(const ModelConfig& c, int layer, const std::string& name, const char* suffix) {
  NV_CHECK(c.arch != nullptr, "a ModelConfig without an architecture");
  return c.arch->names.layer_prefix + std::to_string(layer) + "." + name + "." + suffix;
}

std::string expert_tensor(const ModelConfig& c, int layer, int64_t expert, const std::string& name) {
  return layer_tensor(c, layer, c.arch->names.experts + "." + std::to_string(expert) + "." + name);
}

std::vector<CheckpointTensor> checkpoint_tensors(const ModelConfig& c) {
  NV_CHECK(c.arch != nullptr, "a ModelConfig without an architecture");
  const TensorNames& n = c.arch->names;
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim, V = c.vocab_size;
  const int64_t q = int64_t(c.num_attention_heads) * D, kv = int64_t(c.num_key_value_heads) * D;
  std::vector<CheckpointTensor> v;
  v.push_back({n.embed, {V, H}});
  v.push_back({n.final_norm, {H}});
  if (!c.tie_word_embeddings) v.push_back({n.lm_head, {V, H}});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    auto w = [&](const std::string& name, Shape s) { v.push_back({layer_tensor(c, l, name), std::move(s)}); };
    auto b = [&](const std::string& name, Shape s) { v.push_back({layer_tensor(c, l, name, "bias"), std::move(s)}); };
    w(n.input_norm, {H});
    w(n.post_attention_norm, {H});
    if (c.sandwich_norm) {
      w(n.pre_feedforward_norm, {H});
      w(n.post_feedforward_norm, {H});
    }
    w(n.q_proj, {q, H});
    w(n.k_proj, {kv, H});
    w(n.v_proj, {kv, H});
    w(n.o_proj, {H, q});
    if (c.attention_bias) {
      b(n.q_proj, {q});
      b(n.k_proj, {kv});
      b(n.v_proj, {kv});
    }
    if (c.o_proj_bias) b(n.o_proj, {H});
    if (c.qk_norm) {
      w(n.q_norm, {D});
      w(n.k_norm, {D});
    }
    if (c.is_moe_layer(l)) {
      const int64_t E = c.num_experts, Im = c.moe_intermediate_size;
      w(n.router, {E, H});
      for (int64_t e = 0; e < E; ++e) {
        v.push_back({expert_tensor(c, l, e, n.expert_gate), {Im, H}});
        v.push_back({expert_tensor(c, l, e, n.expert_up), {Im, H}});
        v.push_back({expert_tensor(c, l, e, n.expert_down), {H, Im}});
      }
    } else {
      w(n.gate_proj, {I, H});
      w(n.up_proj, {I, H});
      w(n.down_proj, {H, I});
    }
  }
  return v;
}

}  // namespace nanovllm
