// The op interface: model code calls these; the CPU backend (kernels/cpu) and the CUDA backend
// (kernels/cuda) implement them. Shapes are row-major; T = tokens in the step, B = sequences,
// H = hidden size, D = head_dim, Hq / Hkv = query / KV heads (per TP rank).
//
// Activation dtype: the backend's act_dtype() (CPU: F32, CUDA: BF16). Weights stay in their
// checkpoint dtype (F32, BF16 or F16). Logits are always F32.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kernels/int4_groups.h"
#include "kernels/moe.h"
#include "kernels/quantized.h"
#include "kernels/sampling.h"
#include "kernels/step_executor.h"
#include "util/tensor.h"

namespace nanovllm {

// The per-step batch metadata, on the backend's device (the one struct that crosses from the
// engine to the model; built by ModelRunner from the scheduler's output). All I32.
struct BatchTensors {
  Tensor input_ids;       // [T]
  Tensor positions;       // [T]   absolute position of each token
  Tensor slot_mapping;    // [T]   KV slot (block_id * block_size + offset), -1 = do not store
  Tensor cu_seqlens_q;    // [B+1] query (new-token) offsets into T
  Tensor context_lens;    // [B]   keys per sequence after this step (cached + new) = seqlen_k
  Tensor block_tables;    // [B, max_blocks_per_seq], -1 padded
  Tensor logits_indices;  // [S]   rows of T whose logits are computed (S <= B usually)
  int num_seqs = 0;
  int num_tokens = 0;
  // Launch-size hints (CUDA grids, decode split-K): >= every seqlen_q / context_lens[b]. An
  // understated value costs speed, never rows or keys.
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  int block_size = 0;
  bool decode_only = false;  // every sequence has exactly one query token
  // Rows past cu_seqlens_q[num_seqs] (up to num_tokens) are padding: a CUDA verification
  // graph's fixed shape (kernels/cuda/graph_policy.h). Attention writes zeros there (no
  // kernel visits them), so they stay finite through the forward.
  bool padded_tail = false;
};

// Host-side copy of the same (what ModelRunner fills; CPU backend uses it directly). Its
// values are checked by validate_batch (kernels/batch_contract.h) before it goes to a device.
struct HostBatch {
  std::vector<int32_t> input_ids, positions, slot_mapping, cu_seqlens_q, context_lens,
      block_tables, logits_indices;
  int num_seqs = 0, num_tokens = 0, max_seqlen_q = 0, max_seqlen_k = 0, block_size = 0;
  int block_table_stride = 0;  // = max_blocks_per_seq
  bool decode_only = false;
  // The last num_extra_rows of logits_indices are not sampled: prompt positions whose logits the
  // engine reads for prompt_logprobs (ModelRunner::run hands their hidden states back).
  int num_extra_rows = 0;
};

struct AttentionParams {
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.f;  // softmax scale, usually 1/sqrt(D)
  // Sliding-window attention (Mistral, Gemma 3 local layers): the query at key position p sees
  // keys p - sliding_window + 1 .. p (transformers' `q - k < window`); 0 = every earlier key.
  int sliding_window = 0;
};

// The gated MLP activation: out = act(gate) * up.
enum class GatedAct {
  Silu,      // x * sigmoid(x) (Llama, Qwen)
  GeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): gelu_pytorch_tanh (Gemma 3)
};

// A model's hidden-state forward for one step: enqueues it and returns hidden [S, H].
using StepForward = std::function<Tensor(const BatchTensors&)>;

// The ops are public non-virtual fronts (defined in kernels/op_contract.cc): each checks the
// op's contract (devices, dtypes, shapes, parameter ranges; the same checks and messages on
// every backend, see kernels/README.md) and then calls the backend's protected *_impl. Values
// inside device tensors (positions, slots, block tables) are not read by the checks: the engine
// validates them on the host (validate_batch, kernels/batch_contract.h) and the kernels treat
// any that still get through the same documented way on every backend.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;
  // The activation dtype the model runs in. Every op also accepts F32 activations.
  virtual DType act_dtype() const = 0;
  // Whether store_kv / attention take a KV cache of this type (all backends: act_dtype()).
  virtual bool kv_cache_dtype_supported(DType d) const { return d == act_dtype(); }
  // Host threads the ops run on (CPU backend: its thread pool); 0 where the host does not run them.
  virtual int num_threads() const { return 0; }

  // --- memory ---------------------------------------------------------------------------
  virtual Tensor empty(const Shape& shape, DType dtype) = 0;
  // The KV cache's storage (allocated once). CPU backend: its own huge-page mapping
  // (kernels/cpu/weight_arena.h: huge_page_empty says why); others: empty().
  virtual Tensor empty_kv_cache(const Shape& shape, DType dtype) { return empty(shape, dtype); }
  // Copies a host tensor to the device. CPU backend: tensors of 64 KiB and more (the weights)
  // are copied into huge-page memory (kernels/cpu/weight_arena.h: faster streaming decode),
  // smaller ones are returned unchanged; BackendOptions::cpu_weight_copy = false
  // (NANOVLLM_CPU_WEIGHT_COPY=0) turns the copy off.
  virtual Tensor to_device(const Tensor& host) = 0;
  // A linear layer's weight [N, K] from a host tensor: to_device(host) as it is, or quantized at
  // load with `scheme` (CPU backend; the others reject a scheme with a clear error).
  virtual LinearWeight prepare_linear(const Tensor& host, const QuantScheme& scheme) {
    NV_CHECK(!scheme.enabled(), "--quantization ", scheme.str(), " is not supported on the ",
             name(), " backend (only on the CPU)");
    return LinearWeight{to_device(host), nullptr};
  }
  // A GPTQ / AWQ linear weight placed on the int4 kernels as stored, without re-quantizing
  // (CPU backend: kernels/cpu/pack_int4.h, lossless for symmetric GPTQ). Backends without int4
  // kernels refuse; the engine gives them the exact dense dequantization instead.
  virtual LinearWeight prepare_linear_int4(const Int4Groups& w) {
    NV_THROW("GPTQ / AWQ int4 weights [", w.N, ", ", w.K, "] cannot run on the ", name(),
             " backend's kernels (no int4 kernels); load them with --quantization none (dense)");
  }
  // A mixture-of-experts layer's E experts (kernels/moe.h), each loaded by `load` and placed
  // like prepare_linear places a weight (quantized with `scheme` where the backend can).
  // Default: prepare_linear per expert; CUDA keeps dense experts in one allocation.
  virtual MoeExperts prepare_moe_experts(int64_t num_experts, int64_t hidden, int64_t intermediate,
                                         const MoeExpertLoader& load, const QuantScheme& scheme);
  // Copies a device tensor into a new host tensor.
  virtual Tensor to_host(const Tensor& t) = 0;
  // Makes BatchTensors from a HostBatch after checking its layout (check_batch_layout: array
  // sizes; not the values). CPU: wraps the host vectors, which must outlive it.
  BatchTensors upload_batch(const HostBatch& hb);
  virtual void synchronize() {}
  // Bytes the KV cache may take, measured after a warm-up forward at the largest batch (CUDA:
  // total * utilization - used - peak + current, nano-vLLM's formula); -1 where the engine
  // decides (CPU: a byte budget or a fraction of RAM).
  virtual int64_t kv_cache_budget_bytes(double gpu_memory_utilization) { return -1; }
  // A graph-replaying executor over `forward` (CUDA: graphs per decode batch bucket, captured
  // here), or null where the backend only runs eagerly. Call make_step_executor()
  // (kernels/eager_executor.h), which honours enforce_eager and falls back to eager.
  virtual std::unique_ptr<StepExecutor> make_graph_executor(const StepForward& forward,
                                                            const StepExecutorOptions& options) {
    return nullptr;
  }

  // --- ops --------------------------------------------------------------------------------
  // "act" = act_dtype() or F32; "float" = F32, BF16 or F16. T may be 0 (every op is a no-op).
  // out[t, :] = table[ids[t] - vocab_start, :] * scale, zeros when outside [vocab_start, +rows).
  // ids I32 [T], table [V_shard, H] float, out [T, H] act. scale: Gemma's sqrt(H); else 1.
  void embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, Tensor& out,
                 float scale = 1.f);
  // out = x / rms(x) * w. x, out [T, H] act (same shape and dtype); w [H] float.
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out);
  // Fused residual: residual += x; x = rms_norm(residual) * w. x, residual [T, H] act.
  void add_rms_norm(Tensor& x, Tensor& residual, const Tensor& w, float eps);
  // out[T, N] = x[T, K] @ w[N, K]^T (+ bias[N]). x act; w, bias float; out act.
  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out);
  // The same with a quantized weight (kernels/quantized.h): x act, out act, bias [N] float.
  // Backends without quantized kernels throw (prepare_linear refuses to make such weights).
  void linear_quantized(const Tensor& x, const QuantizedWeight& w, const Tensor* bias, Tensor& out);
  // A linear layer's weight, dense or quantized: what models call.
  void linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) {
    if (w.quantized()) linear_quantized(x, *w.quant, bias, out);
    else linear(x, w.dense, bias, out);
  }
  // out[T, I] = silu(gate_up[:, :I]) * gate_up[:, I:]. gate_up [T, 2I] act, out same dtype.
  void silu_and_mul(const Tensor& gate_up, Tensor& out) { act_and_mul(gate_up, GatedAct::Silu, out); }
  // The same with another activation (GatedAct).
  void act_and_mul(const Tensor& gate_up, GatedAct act, Tensor& out);
  // In place on qkv [T, (Hq + 2 Hkv) * D] act: optional per-head RMSNorm of q and k (Qwen3;
  // weights [D] float of one dtype, null to skip), then rotate-half (NeoX) RoPE of q and k at
  // positions I32 [T], using cos_sin F32 [max_pos, D] (first D/2 columns cos, last D/2 sin).
  // A position outside [0, max_pos) leaves that token's q/k normed but not rotated.
  void qk_norm_rope(Tensor& qkv, const Tensor& positions, const Tensor* q_norm,
                    const Tensor* k_norm, float eps, const Tensor& cos_sin,
                    const AttentionParams& p);
  // Stores k and v of qkv into the paged cache at slot_mapping I32 [T]; slots outside
  // [0, num_slots) (-1: padding) are not stored. k_cache, v_cache [num_slots, Hkv, D], qkv's
  // dtype or, for act_dtype() activations, any type kv_cache_dtype_supported() (rounded).
  void store_kv(const Tensor& qkv, const Tensor& slot_mapping, Tensor& k_cache, Tensor& v_cache,
                const AttentionParams& p);
  // Causal attention of the step's queries (q part of qkv) over each sequence's paged context
  // (keys 0 .. context_lens[b]-1; query i of sequence b sits at key position
  // context_lens[b] - seqlen_q(b) + i; with p.sliding_window W > 0 it sees only the last W keys
  // up to its own position). Covers prefill, prefix-cached prefill, chunked prefill
  // and decode. out [T, Hq * D], qkv's dtype. Keys whose block-table entry is missing (< 0,
  // >= num_blocks, or past the table's width) are masked; a query that sees no key gets zeros.
  void attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                 const BatchTensors& batch, const AttentionParams& p, Tensor& out);
  // out[i, :] = x[idx[i], :], zeros where idx[i] is outside [0, rows). x [T, ...], idx I32 [S],
  // out [S, ...] (x's dtype, any dtype).
  void gather_rows(const Tensor& x, const Tensor& idx, Tensor& out);
  // a += b (elementwise, same shape and act dtype). Tensor-parallel partial sums on one device.
  void add_inplace(Tensor& a, const Tensor& b);
  // Mixture-of-experts router: per row of logits [T, E] (act or F32), the top_k largest of
  // softmax(row) in decreasing order (equal probabilities: the lower expert id first): ids I32
  // [T, top_k] and probabilities F32 [T, top_k], divided by their sum when `normalize`
  // (Qwen3-MoE's norm_topk_prob). Computed in F32 from the logits as given (the router is exact:
  // never quantized). 1 <= top_k <= E.
  void moe_route(const Tensor& logits, int top_k, bool normalize, Tensor& ids, Tensor& weights);
  // Mixture-of-experts MLP: out[t] = sum_j weights[t, j] * down_e(silu(gate_e x_t) * up_e x_t),
  // e = ids[t, j]. x [T, H] act, ids I32 [T, k], weights F32 [T, k], out [T, H] x's dtype (fully
  // written). An id outside [0, E) contributes nothing. Tokens are grouped by expert, so each
  // active expert's weights are read once per call, not once per token.
  void moe_experts(const Tensor& x, const MoeExperts& experts, const Tensor& ids,
                   const Tensor& weights, Tensor& out);
  // One token per row of logits [S, V] (F32 on this backend's device) with batch.rows[r] as
  // row r's parameters; the definition is in kernels/sampling.h. Only the S tokens and the
  // requested logprobs come back to the host. Throws on bad input (validate_sampling_batch).
  virtual SampleResult sample(const Tensor& logits, const SamplingBatch& batch) = 0;

 protected:
  // The implementations, called only after the contract checks passed.
  virtual BatchTensors upload_batch_impl(const HostBatch& hb) = 0;
  virtual void embedding_impl(const Tensor& ids, const Tensor& table, int64_t vocab_start,
                              Tensor& out, float scale) = 0;
  virtual void rms_norm_impl(const Tensor& x, const Tensor& w, float eps, Tensor& out) = 0;
  virtual void add_rms_norm_impl(Tensor& x, Tensor& residual, const Tensor& w, float eps) = 0;
  virtual void linear_impl(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) = 0;
  virtual void linear_quantized_impl(const Tensor& x, const QuantizedWeight& w, const Tensor* bias,
                                     Tensor& out) {
    NV_THROW("quantized linear layers are not supported on the ", name(), " backend");
  }
  virtual void act_and_mul_impl(const Tensor& gate_up, GatedAct act, Tensor& out) = 0;
  virtual void qk_norm_rope_impl(Tensor& qkv, const Tensor& positions, const Tensor* q_norm,
                                 const Tensor* k_norm, float eps, const Tensor& cos_sin,
                                 const AttentionParams& p) = 0;
  virtual void store_kv_impl(const Tensor& qkv, const Tensor& slot_mapping, Tensor& k_cache,
                             Tensor& v_cache, const AttentionParams& p) = 0;
  virtual void attention_impl(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                              const BatchTensors& batch, const AttentionParams& p,
                              Tensor& out) = 0;
  virtual void gather_rows_impl(const Tensor& x, const Tensor& idx, Tensor& out) = 0;
  virtual void moe_route_impl(const Tensor& logits, int top_k, bool normalize, Tensor& ids,
                              Tensor& weights) = 0;
  virtual void moe_experts_impl(const Tensor& x, const MoeExperts& experts, const Tensor& ids,
                                const Tensor& weights, Tensor& out) = 0;
  virtual void add_inplace_impl(Tensor& a, const Tensor& b) = 0;
};

// Backends are made by kernels/backend_factory.h.

}  // namespace nanovllm
