// The Qwen3 / Qwen2 / Llama decoder-only transformer on a Backend. It knows nothing of
// sequences or queues: each forward takes the step's BatchTensors and the paged KV cache.
//
// Per layer (T tokens):  x[T,H] -> add_rms_norm -> qkv = x W_qkv^T (+b) [T,(Hq+2Hkv)D]
//   -> q/k norm (Qwen3) + RoPE -> store K,V by slot_mapping -> paged attention [T,Hq*D]
//   -> o_proj [T,H] -> add_rms_norm -> gate_up [T,2I] -> silu*mul [T,I] -> down [T,H]
//   (MoE layers instead: router logits x W_r^T [T,E] -> top-k experts per token [T,k] ->
//   moe_experts [T,H]: each token's k experts' MLPs weighted by their router probabilities)
// Gemma 3 (ModelConfig::sandwich_norm): the attention output is RMS-normed before its residual
//   add, the MLP's input normed by pre_feedforward and its output by post_feedforward; norms
//   multiply by (1 + w); the MLP is GELU(tanh); sliding-window layers use a local RoPE table.
// Final: add_rms_norm, gather logits_indices rows -> hidden [S,H] (forward_hidden), then the
// LM head -> logits [S,V] F32 (compute_logits). The split lets a CUDA graph capture the
// hidden-state forward only: its persistent output is [bs, H], never [bs, V].
//
// Tensor parallel (models/tp_shard.h): each rank runs its heads and its slice of the MLP; the
// partial outputs of o_proj and down_proj and the vocab-parallel embedding are summed with the
// communicator's all-reduce (every rank then holds the full residual stream), and the LM head's
// [S, V/N] logits are gathered to rank 0.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/backend.h"
#include "parallel/communicator.h"
#include "loader/tp_slice.h"
#include "models/model_config.h"
#include "models/tp_shard.h"

namespace nanovllm {

// Paged KV cache: one allocation [2, L, num_blocks * block_size, Hkv, D]; k[l] / v[l] are views.
// An int8 cache (kKvCacheInt8, U8 bytes) has rows of D + 4 (the values and their scale, kernels/kv_cache_int8.h).
struct KVCache {
  Tensor storage;
  std::vector<Tensor> k, v;  // per layer [num_blocks * block_size, Hkv, D]
  int num_blocks = 0;
  int block_size = 0;
  // Per rank: num_kv_heads = the rank's KV heads (TpShard::num_kv_heads; -1: all the model's).
  // dtype: the cache's element type (default: the backend's act_dtype()).
  static size_t block_bytes(const ModelConfig& c, int block_size, DType dtype,
                            int num_kv_heads = -1);
  static KVCache allocate(Backend& be, const ModelConfig& c, int num_blocks, int block_size,
                          int num_kv_heads = -1, std::optional<DType> dtype = std::nullopt);
};

// Load-time choices that config.json does not make.
struct ModelLoadOptions {
  QuantScheme linear_quant;   // q/k/v/o, gate/up and down projections
  QuantScheme lm_head_quant;  // the LM head (tied: a quantized copy; the embedding stays dense);
                              // int6-g16-k / int5-g32-zp-k / int5-g32-zp / int3-g16-k /
                              // int2-g16-zp-k: the GGUF's Q6_K / Q5_K / Q5_1 / Q3_K / Q2_K head as stored
  // Per checkpoint tensor (GGUF, quantization auto): overrides linear_quant for the linears
  // built from it. A fused linear (q/k/v, gate/up) whose parts differ runs each part in its own
  // form (mixed_quantized_parts: a composite weight) where each stays quantized; else it takes
  // the most precise of their schemes (scheme_for), so no part loses precision it had in the file.
  std::map<std::string, QuantScheme> tensor_quant;
  QuantScheme scheme_for(const std::vector<std::string>& names) const;
  // GPTQ / AWQ checkpoints (loader/int4_checkpoint.h) and a GGUF's Q4_K / Q5_K / Q6_K tensors
  // (WeightStore::has_int4): their linears go to the int4 kernels as stored
  // (Backend::prepare_linear_int4); false: they load as their exact f32 dequantization, then
  // follow linear_quant (tensor_quant) like any dense weight.
  bool checkpoint_int4 = false;
};

// Whether DecoderModel loads the fused linear of `names` (q/k/v, gate/up) as a composite of its
// parts (kernels/quantized.h): with checkpoint_int4, when every part stays quantized (as stored,
// or by its own tensor's scheme) and their forms differ. (bench/decode_roofline.cc counts bytes
// by it.)
bool mixed_quantized_parts(const WeightStore& ws, const std::vector<std::string>& names, const ModelLoadOptions& opt);

class DecoderModel {
 public:
  // Loads the rank's shard of the weights. `comm` (null: single rank) must outlive the model
  // and match shard.world.
  DecoderModel(const ModelConfig& config, Backend& backend, const WeightStore& weights,
               int max_positions, const TpShard& shard, Communicator* comm,
               const ModelLoadOptions& options = {});
  // Single rank.
  DecoderModel(const ModelConfig& config, Backend& backend, const WeightStore& weights,
               int max_positions, const ModelLoadOptions& options = {});
  // Hidden states [S, H] (act dtype) after the final norm, S = batch.logits_indices rows, on
  // the backend's device. Enqueues only (no sync, no host copy): CUDA graphs capture it.
  Tensor forward_hidden(const BatchTensors& batch, KVCache& cache);
  // LM head: hidden [S, H] -> logits [S, V] F32 on the backend's device, on rank 0 (other
  // ranks take part in the gather and get an undefined tensor).
  Tensor compute_logits(const Tensor& hidden);
  // compute_logits(forward_hidden(batch, cache)).
  Tensor forward(const BatchTensors& batch, KVCache& cache);
  const ModelConfig& config() const { return cfg_; }
  size_t weight_bytes() const { return weight_bytes_; }  // bytes of all weights (one copy)
  int num_local_q_heads() const { return shard_.num_q_heads; }
  int num_local_kv_heads() const { return shard_.num_kv_heads; }
  const TpShard& shard() const { return shard_; }

 private:
  struct Layer {
    LinearWeight qkv_w, o_w, gate_up_w, down_w;  // gate_up / down: dense MLP layers
    Tensor qkv_b, o_b, q_norm, k_norm, in_norm, post_norm;
    Tensor pre_ff_norm, post_ff_norm;  // sandwich_norm only
    int sliding_window = 0;            // 0: full causal attention
    bool moe = false;
    Tensor router;       // MoE: [E, H], never quantized (the routing stays exact)
    MoeExperts experts;  // MoE: the rank's slice of every expert
  };
  Tensor upload(const Tensor& host);
  // A norm weight [n]: as stored, or 1 + w in F32 where norms multiply by (1 + w) (Gemma).
  Tensor load_norm(const WeightStore& ws, const std::string& name, int64_t n);
  static void check_all_tensors_used(const ModelConfig& c, const WeightStore& ws);
  LinearWeight upload_linear(const Tensor& host, const QuantScheme& q);
  // A packed (column-parallel) or row-parallel linear: the checkpoint's int4 groups when
  // options.checkpoint_int4 and every part is WeightStore::has_int4 in one form; with
  // checkpoint_int4 and parts of different forms, each part in its own (a composite weight,
  // kernels/quantized.h) when every one stays quantized; else dense + linear_quant.
  LinearWeight column_linear(const WeightStore& ws, const std::vector<std::string>& names,
                             const std::vector<Shape>& shapes, const std::vector<RowRange>& rows,
                             const ModelLoadOptions& opt);
  LinearWeight row_linear(const WeightStore& ws, const std::string& name, const Shape& shape,
                          const TpInfo& tp, const ModelLoadOptions& opt);

  ModelConfig cfg_;
  Backend& be_;
  TpShard shard_;
  Communicator* comm_ = nullptr;  // null or world 1: no collectives
  std::vector<Layer> layers_;
  Tensor embed_, final_norm_, cos_sin_;
  Tensor cos_sin_local_;      // sliding-window layers' RoPE table when rope_local_theta > 0
  float embed_scale_ = 1.f;   // sqrt(H) rounded to the embedding's dtype (Gemma), else 1
  LinearWeight lm_head_;
  size_t weight_bytes_ = 0;
};

}  // namespace nanovllm
