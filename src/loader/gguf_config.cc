// GGUF metadata -> the config.json a Hugging Face checkpoint of the same model would carry, so
// one parser (src/models/model_config.cc) validates both. Keys are llama.cpp's
// (<arch>.embedding_length, <arch>.attention.head_count, ...). What the engine cannot run the
// same way is refused here, naming the key.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "loader/gguf_checkpoint.h"
#include "loader/gguf_quants.h"
#include "util/check.h"

namespace nanovllm {

std::string GgufCheckpoint::hf_config_json() const {
  using json = nlohmann::json;
  const GgufFile& m = meta();
  const std::string& a = arch_;
  const std::string where = "GGUF file '" + path_ + "'";
  json c;
  if (a == "qwen3") {
    c["architectures"] = {"Qwen3ForCausalLM"};
    c["model_type"] = "qwen3";
  } else if (a == "qwen2") {
    c["architectures"] = {"Qwen2ForCausalLM"};
    c["model_type"] = "qwen2";
  } else if (a == "llama") {
    c["architectures"] = {"LlamaForCausalLM"};
    c["model_type"] = "llama";
    c["attention_bias"] = refs_.count("model.layers.0.self_attn.q_proj.bias") > 0;
  } else if (a == "qwen3moe") {
    c["architectures"] = {"Qwen3MoeForCausalLM"};
    c["model_type"] = "qwen3_moe";
    c["num_experts"] = m.get_int(a + ".expert_count");
    c["num_experts_per_tok"] = m.get_int(a + ".expert_used_count");
    c["moe_intermediate_size"] = m.get_int(a + ".expert_feed_forward_length");
    c["norm_topk_prob"] = true;  // llama.cpp's qwen3moe always renormalizes the top-k weights
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = json::array();
  } else if (a == "gemma3") {
    c["architectures"] = {"Gemma3ForCausalLM"};
    c["model_type"] = "gemma3_text";
    c["hidden_activation"] = "gelu_pytorch_tanh";
    c["sliding_window"] = m.get_int(a + ".attention.sliding_window");
    c["rope_local_base_freq"] = m.get_float(a + ".rope.freq_base_swa", 10000.0);
    const int64_t L = m.get_int(a + ".block_count");
    json types = json::array();
    if (const GgufValue* p = m.find(a + ".attention.sliding_window_pattern")) {
      if (p->type == GgufValueType::ARRAY) {
        if (p->elem_type != GgufValueType::BOOL || int64_t(p->count) != L)
          NV_THROW(where, ": ", a, ".attention.sliding_window_pattern must be ", L, " bools");
        for (uint64_t i = 0; i < p->count; ++i)
          types.push_back(p->element(i).b ? "sliding_attention" : "full_attention");
      } else {
        const int64_t n = m.get_int(a + ".attention.sliding_window_pattern");
        if (n <= 0) NV_THROW(where, ": ", a, ".attention.sliding_window_pattern must be positive");
        for (int64_t i = 0; i < L; ++i)
          types.push_back((i + 1) % n == 0 ? "full_attention" : "sliding_attention");
      }
    } else {  // llama.cpp's gemma3 default: every 6th layer global
      for (int64_t i = 0; i < L; ++i) types.push_back((i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
    }
    c["layer_types"] = types;
  } else {
    NV_THROW(where, " has architecture '", a,
             "'; nanovllm runs GGUF models of: qwen3, qwen2, llama (Llama, Mistral), qwen3moe, gemma3");
  }

  c["hidden_size"] = m.get_int(a + ".embedding_length");
  c["num_hidden_layers"] = m.get_int(a + ".block_count");
  if (const GgufValue* ff = m.find(a + ".feed_forward_length"); ff && ff->type == GgufValueType::ARRAY)
    NV_THROW(where, ": per-layer ", a, ".feed_forward_length is not supported");
  c["intermediate_size"] = a == "qwen3moe" ? m.get_int(a + ".feed_forward_length",
                                                       m.get_int(a + ".expert_feed_forward_length"))
                                           : m.get_int(a + ".feed_forward_length");
  const int64_t heads = m.get_int(a + ".attention.head_count");
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] = m.get_int(a + ".attention.head_count_kv", heads);
  const int64_t hidden = c["hidden_size"].get<int64_t>();
  const int64_t head_dim = m.get_int(a + ".attention.key_length", heads > 0 ? hidden / heads : 0);
  if (m.get_int(a + ".attention.value_length", head_dim) != head_dim)
    NV_THROW(where, ": ", a, ".attention.value_length differs from key_length (not supported)");
  c["head_dim"] = head_dim;
  if (m.has(a + ".rope.dimension_count") && m.get_int(a + ".rope.dimension_count") != head_dim)
    NV_THROW(where, ": ", a, ".rope.dimension_count ", m.get_int(a + ".rope.dimension_count"),
             " differs from the head size ", head_dim, " (partial RoPE is not supported)");
  c["rms_norm_eps"] = m.get_float(a + ".attention.layer_norm_rms_epsilon", 1e-6);
  c["rope_theta"] = m.get_float(a + ".rope.freq_base", a == "gemma3" ? 1000000.0 : 10000.0);
  c["max_position_embeddings"] = m.get_int(a + ".context_length", 2048);
  if (a == "gemma3") c["query_pre_attn_scalar"] = head_dim;  // llama.cpp scales by 1/sqrt(head_dim)

  const std::string rs = m.get_string(a + ".rope.scaling.type", "none");
  if (rs == "linear") {
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", m.get_float(a + ".rope.scaling.factor")}};
  } else if (rs == "yarn") {
    c["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", m.get_float(a + ".rope.scaling.factor")},
                         {"original_max_position_embeddings",
                          m.get_int(a + ".rope.scaling.original_context_length")}};
  } else if (rs != "none") {
    NV_THROW(where, ": ", a, ".rope.scaling.type '", rs, "' is not supported (none, linear, yarn)");
  }
  if (refs_.count("rope_freqs.weight")) {
    // Per-frequency RoPE divisors (llama.cpp's converter writes Llama 3.1's llama3 scaling as
    // this tensor, not as metadata): into the config, where rope_inv_freq applies them.
    if (rs != "none")
      NV_THROW(where, " has a rope_freqs tensor and ", a, ".rope.scaling.type '", rs,
               "': the two together are not supported");
    const Tensor ff = get("rope_freqs.weight");
    if (ff.dtype() != DType::F32 || ff.ndim() != 1 || ff.numel() != head_dim / 2)
      NV_THROW(where, ": rope_freqs.weight must hold head_dim / 2 = ", head_dim / 2,
               " F32 factors, got ", ff.str());
    json factors = json::array();
    for (int64_t i = 0; i < ff.numel(); ++i) factors.push_back(double(ff.data<float>()[i]));
    c["rope_freq_factors"] = factors;  // checked (positive, finite) by the config parser
  }

  const Ref* emb = nullptr;
  if (auto it = refs_.find("model.embed_tokens.weight"); it != refs_.end()) emb = &it->second;
  if (!emb || emb->t->ne.size() != 2) NV_THROW(where, " has no 2-D token_embd.weight tensor");
  c["vocab_size"] = emb->t->ne[1];
  c["tie_word_embeddings"] = refs_.count("lm_head.weight") == 0;

  // dtype: what the weights dequantize to (block types -> float32, see get()).
  bool f16 = false, bf16 = false, f32 = false;
  for (const auto& [n, r] : refs_) {
    if (r.t->ne.size() < 2) continue;
    if (r.t->type == uint32_t(GgmlType::F16)) f16 = true;
    else if (r.t->type == uint32_t(GgmlType::BF16)) bf16 = true;
    else f32 = true;
  }
  c["torch_dtype"] = f32 || (f16 && bf16) ? "float32" : bf16 ? "bfloat16" : f16 ? "float16" : "float32";

  if (m.has("tokenizer.ggml.bos_token_id")) c["bos_token_id"] = m.get_int("tokenizer.ggml.bos_token_id");
  json eos = json::array();
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
    if (m.has(k)) {
      const int64_t id = m.get_int(k);
      if (std::find(eos.begin(), eos.end(), json(id)) == eos.end()) eos.push_back(id);
    }
  if (!eos.empty()) c["eos_token_id"] = eos;
  return c.dump(2);
}

}  // namespace nanovllm
