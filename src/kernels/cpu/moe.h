// CPU mixture-of-experts ops (Backend::moe_route / moe_experts, kernels/backend.h): F32
// activations. The experts' linears run through the backend's own linear (dense GEMM or the
// int8/int4 kernels), one call per active expert over all of that expert's tokens.
#pragma once
#include <functional>

#include "kernels/moe.h"
#include "util/tensor.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

// out[M, N] = x[M, K] @ w^T: the backend's linear for a dense or quantized weight.
using LinearFn = std::function<void(const Tensor& x, const LinearWeight& w, Tensor& out)>;

void moe_route(const Tensor& logits, int top_k, bool normalize, Tensor& ids, Tensor& weights,
               ThreadPool& pool);
void moe_experts(const Tensor& x, const MoeExperts& experts, const Tensor& ids,
                 const Tensor& weights, Tensor& out, ThreadPool& pool, const LinearFn& linear);

}  // namespace nanovllm::cpu
