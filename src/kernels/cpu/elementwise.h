// Row-wise CPU ops over F32 activations: embedding, RMSNorm (+ fused residual add),
// SiLU- and GELU(tanh)-and-mul, Qwen3 q/k norm + rotate-half RoPE, row gather, add.
#pragma once
#include "kernels/backend.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

void embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, Tensor& out,
               float scale, ThreadPool& pool);
void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out, ThreadPool& pool);
void add_rms_norm(Tensor& x, Tensor& residual, const Tensor& w, float eps, ThreadPool& pool);
void silu_and_mul(const Tensor& gate_up, Tensor& out, ThreadPool& pool);
void gelu_tanh_and_mul(const Tensor& gate_up, Tensor& out, ThreadPool& pool);
void qk_norm_rope(Tensor& qkv, const Tensor& positions, const Tensor* q_norm, const Tensor* k_norm,
                  float eps, const Tensor& cos_sin, const AttentionParams& p, ThreadPool& pool);
void gather_rows(const Tensor& x, const Tensor& idx, Tensor& out);
void add_inplace(Tensor& a, const Tensor& b);

}  // namespace nanovllm::cpu
