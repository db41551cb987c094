// CPU mixture-of-experts ops (Backend::moe_route / moe_experts, kernels/backend.h): F32
// activations. The experts' linears run through the backend's own linear (dense GEMM or the
// int8/int4 kernels), one call per active expert over all of that expert's tokens.
//
// Two schedules: with at least two active experts per thread and quantized experts, the
// experts are shared out among the threads (each runs whole experts on one thread: one
// parallel region per layer instead of two per expert, and each thread streams its own
// experts' weights); otherwise experts run one after another, each linear split over the
// threads. Both give the same bits: a row's result does not depend on how rows are split, and
// the outputs are summed per token in ascending expert order after all experts ran.
#pragma once
#include <functional>

#include "kernels/moe.h"
#include "util/tensor.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

// out[M, N] = x[M, K] @ w^T on `pool`: the backend's linear for a dense or quantized weight.
using LinearFn =
    std::function<void(const Tensor& x, const LinearWeight& w, Tensor& out, ThreadPool& pool)>;

void moe_route(const Tensor& logits, int top_k, bool normalize, Tensor& ids, Tensor& weights,
               ThreadPool& pool);
void moe_experts(const Tensor& x, const MoeExperts& experts, const Tensor& ids,
                 const Tensor& weights, Tensor& out, ThreadPool& pool, const LinearFn& linear);

}  // namespace nanovllm::cpu
