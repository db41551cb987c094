// The Hugging Face config.json fields nanovllm needs: the common ones parsed here, the
// architecture's own ones by its file in models/arch/ (block options below).
#pragma once
#include <string>
#include <vector>

#include "util/dtype.h"

namespace nanovllm {

struct Architecture;  // models/arch/architecture.h

struct RopeScaling {
  std::string type = "default";  // default | linear | llama3 | yarn (others: an error)
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  // llama3 (required) and yarn (default: max_position_embeddings): the pre-training context.
  int original_max_position_embeddings = 8192;
  // yarn: the ramp between extrapolated (fast) and interpolated (slow) frequencies, and the
  // cos/sin magnitude scale (mscale; attention logits scale by its square).
  double beta_fast = 32, beta_slow = 1;
  double attention_factor = 1.0;  // resolved at parse time (from factor / mscale when absent)
  bool truncate = true;           // yarn: floor/ceil the correction range
};

struct ModelConfig {
  const Architecture* arch = nullptr;  // the registry's entry (models/arch/): its tensor names
  std::string architecture;  // as written in config.json ("Qwen3ForCausalLM")
  std::string model_type;    // "qwen3" / "qwen2" / "llama" as written (informational)
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;  // config's head_dim, else hidden_size / num_attention_heads
  int vocab_size = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  // Per-frequency RoPE divisors [head_dim / 2] (GGUF's rope_freqs tensor, e.g. Llama 3.1's
  // scaling as llama.cpp stores it: pair i turns at theta^(-2i/D) / rope_freq_factors[i]).
  // Set from a GGUF file (config key "rope_freq_factors"); empty: none.
  std::vector<double> rope_freq_factors;
  int max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  // Block options: set by the architecture's configure() (models/arch/), read by the decoder.
  bool attention_bias = false;  // q/k/v bias (Qwen2 always; Llama/Qwen3 per config)
  bool o_proj_bias = false;     // o_proj bias (Llama/Qwen3: attention_bias; Qwen2 never)
  bool qk_norm = false;         // Qwen3 per-head q/k RMSNorm
  // Mixture of experts (Qwen3-MoE): a sparse MLP block in the layers marked in moe_layers (the
  // others keep the dense MLP of intermediate_size). Router: softmax over num_experts, the top
  // num_experts_per_tok, renormalized to sum 1 when norm_topk_prob.
  int num_experts = 0;
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;  // each expert's intermediate size
  bool norm_topk_prob = false;
  std::vector<bool> moe_layers;   // [num_hidden_layers] or empty (no MoE layer)
  bool is_moe_layer(int l) const { return l >= 0 && size_t(l) < moe_layers.size() && moe_layers[size_t(l)]; }
  // Sliding-window attention (Mistral; Gemma 3's local layers): layer l's query at position p
  // sees keys p - window + 1 .. p. Empty or 0: full causal attention.
  std::vector<int> layer_sliding_window;  // [num_hidden_layers] or empty
  int sliding_window(int l) const {
    return l >= 0 && size_t(l) < layer_sliding_window.size() ? layer_sliding_window[size_t(l)] : 0;
  }
  // > 0: the sliding-window layers use plain RoPE with this base instead of rope_theta and
  // rope_scaling (Gemma 3's rope_local_base_freq; its global layers keep the scaled table).
  double rope_local_theta = 0;
  // Gemma: every RMSNorm multiplies by (1 + w) (the stored weights are offsets from 1).
  bool norm_weight_offset = false;
  // Gemma 3 "sandwich" norms: the attention and MLP outputs are RMS-normed (post_attention /
  // post_feedforward) before their residual add, and the MLP input by pre_feedforward.
  bool sandwich_norm = false;
  // Gemma: embeddings are multiplied by sqrt(hidden_size), rounded to the embedding's dtype.
  bool scale_embeddings = false;
  // Softmax scale of attention; 0: 1 / sqrt(head_dim). Gemma 3: query_pre_attn_scalar^-0.5.
  double attention_scale = 0;
  DType torch_dtype = DType::BF16;  // from_json_text: float32 when the config names none
  std::string hidden_act = "silu";  // silu | gelu_pytorch_tanh
  // from config.json; from_dir() appends generation_config.json's eos ids not already listed
  std::vector<int> eos_token_ids;
  int bos_token_id = -1;

  // Parses a config.json text; `where` names the file in errors. Errors name the field and
  // value: unsupported architecture, activation or rope scaling type; missing required field.
  static ModelConfig from_json_text(const std::string& text, const std::string& where);
  static ModelConfig from_dir(const std::string& model_dir);  // reads <dir>/config.json

  // The longest sequence the model supports: max_position_embeddings, or for YaRN
  // original_max_position_embeddings * factor (vLLM's rule: Qwen3 + YaRN factor 4 = 131072).
  int max_context_len() const;
};

// Rotary inverse frequencies [head_dim / 2] after rope scaling.
std::vector<double> rope_inv_freq(const ModelConfig& c);
// The factor cos and sin are multiplied by (YaRN's attention_factor; 1 otherwise).
double rope_attention_factor(const ModelConfig& c);

}  // namespace nanovllm
