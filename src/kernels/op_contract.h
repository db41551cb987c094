// The op contract: what every Backend op accepts, checked on the host before the backend's
// implementation runs (Backend's public op fronts call these; op_contract.cc). One function
// per op, so the CPU and CUDA backends accept and reject exactly the same calls with the same
// messages. The checks read shapes, dtypes, devices and scalar parameters only, never the
// contents of a tensor (that would need a device sync); batch values are checked by
// validate_batch (kernels/batch_contract.h).
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace nanovllm::contract {

// Largest head_dim any backend supports (CUDA attention keeps a query head in shared memory).
constexpr int kMaxHeadDim = 256;

// num_q_heads, num_kv_heads >= 1, num_q_heads % num_kv_heads == 0, 1 <= head_dim <= 256,
// finite scale. `rope`: head_dim must also be even (rotate-half pairs column i with i + D/2).
void attention_params(const AttentionParams& p, bool rope);

void embedding(const Backend& be, const Tensor& ids, const Tensor& table, int64_t vocab_start,
               const Tensor& out);
void rms_norm(const Backend& be, const Tensor& x, const Tensor& w, float eps, const Tensor& out);
void add_rms_norm(const Backend& be, const Tensor& x, const Tensor& residual, const Tensor& w,
                  float eps);
void linear(const Backend& be, const Tensor& x, const Tensor& w, const Tensor* bias,
            const Tensor& out);
void linear_quantized(const Backend& be, const Tensor& x, const QuantizedWeight& w,
                      const Tensor* bias, const Tensor& out);
void act_and_mul(const Backend& be, const Tensor& gate_up, GatedAct act, const Tensor& out);
void qk_norm_rope(const Backend& be, const Tensor& qkv, const Tensor& positions,
                  const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& cos_sin,
                  const AttentionParams& p);
void store_kv(const Backend& be, const Tensor& qkv, const Tensor& slot_mapping,
              const Tensor& k_cache, const Tensor& v_cache, const AttentionParams& p);
void attention(const Backend& be, const Tensor& qkv, const Tensor& k_cache,
               const Tensor& v_cache, const BatchTensors& batch, const AttentionParams& p,
               const Tensor& out);
void gather_rows(const Backend& be, const Tensor& x, const Tensor& idx, const Tensor& out);
void add_inplace(const Backend& be, const Tensor& a, const Tensor& b);

}  // namespace nanovllm::contract
