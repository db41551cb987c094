// The CPU backend's sampling op (definition in kernels/sampling.h): rows in parallel on the
// backend's pool, each row single-threaded, so results do not depend on the thread count.
#pragma once
#include "kernels/sampling.h"
#include "util/tensor.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

// logits [S, V] F32 (CPU). Validates the batch first (validate_sampling_batch).
SampleResult sample(const Tensor& logits, const SamplingBatch& batch, ThreadPool& pool);

}  // namespace nanovllm::cpu
