// CudaBackend: the Backend interface on one NVIDIA GPU (compute capability >= 8.0).
// Activations BF16, weights as loaded (BF16 fast path; F16 / F32 weights go through a
// convert-then-GEMM path), logits F32. Every op is enqueued on the backend's own stream
// (non-blocking, so it can be captured into CUDA graphs); device memory comes from a caching
// allocator so steady-state steps do no cudaMalloc.
#pragma once
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_factory.h"
#include "kernels/cuda/device_allocator.h"

namespace nanovllm::cuda {

class Gemm;

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int device_id, const BackendOptions& options = {});
  ~CudaBackend() override;

  Device device() const override { return Device::CUDA; }
  std::string name() const override { return name_; }
  DType act_dtype() const override { return DType::BF16; }

  Tensor empty(const Shape& shape, DType dtype) override;
  Tensor to_device(const Tensor& host) override;
  Tensor to_host(const Tensor& t) override;
  void synchronize() override;
  int64_t kv_cache_budget_bytes(double gpu_memory_utilization) override;
  // GraphStepExecutor (graph_executor.h): captures `forward` per decode bucket now.
  std::unique_ptr<StepExecutor> make_graph_executor(const StepForward& forward,
                                                    const StepExecutorOptions& options) override;

  // One launch (sampler.cu); the rows, edits and masks go up in one copy, the tokens and
  // logprobs come back in one copy (sampling_op.cc).
  SampleResult sample(const Tensor& logits, const SamplingBatch& batch) override;
  // Dense experts only, each set in one allocation ([E * 2I, H] and [E * H, I]: moe.cu indexes
  // experts by stride); a quantization scheme is refused like prepare_linear refuses it.
  MoeExperts prepare_moe_experts(int64_t num_experts, int64_t hidden, int64_t intermediate,
                                 const MoeExpertLoader& load, const QuantScheme& scheme) override;

  // --- CUDA-specific ----------------------------------------------------------------------

  // Prefill attention kernel: CUDA-core fp32 (kSimple) or WMMA tensor cores (kTensorCore,
  // bf16 only; falls back to kSimple otherwise). Initially BackendOptions::cuda_prefill.
  enum class PrefillImpl { kSimple, kTensorCore };
  void set_prefill_impl(PrefillImpl impl) { prefill_impl_ = impl; }
  PrefillImpl prefill_impl() const { return prefill_impl_; }

  // Decode attention kernel: v1 (attention_decode.cu) or v2 (attention_decode_v2.cu; falls back
  // to v1 for the shapes it lacks). Initially BackendOptions::cuda_decode. Both have the same
  // contract; a graph captured with one replays that one.
  enum class DecodeImpl { kV1, kV2 };
  void set_decode_impl(DecodeImpl impl) { decode_impl_ = impl; }
  DecodeImpl decode_impl() const { return decode_impl_; }

  cudaStream_t stream() const { return stream_; }
  int device_id() const { return device_; }
  int num_sms() const { return num_sms_; }
  DeviceAllocator& allocator() { return *alloc_; }
  const Gemm& gemm() const { return *gemm_; }  // tests: which path linears took

  // Inputs of compute_num_kv_blocks (sizing.h): device total / free bytes (cudaMemGetInfo) and
  // the allocator's peak / current bytes.
  struct MemoryInfo {
    int64_t total = 0, free = 0, peak = 0, current = 0;
  };
  MemoryInfo memory_info();

 protected:
  // Contract checks ran in Backend's fronts (kernels/op_contract.cc).
  BatchTensors upload_batch_impl(const HostBatch& hb) override;
  void embedding_impl(const Tensor& ids, const Tensor& table, int64_t vocab_start, Tensor& out,
                      float scale) override;
  void rms_norm_impl(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void add_rms_norm_impl(Tensor& x, Tensor& residual, const Tensor& w, float eps) override;
  void linear_impl(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) override;
  void act_and_mul_impl(const Tensor& gate_up, GatedAct act, Tensor& out) override;
  void qk_norm_rope_impl(Tensor& qkv, const Tensor& positions, const Tensor* q_norm,
                         const Tensor* k_norm, float eps, const Tensor& cos_sin,
                         const AttentionParams& p) override;
  void store_kv_impl(const Tensor& qkv, const Tensor& slot_mapping, Tensor& k_cache,
                     Tensor& v_cache, const AttentionParams& p) override;
  void attention_impl(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                      const BatchTensors& batch, const AttentionParams& p, Tensor& out) override;
  void gather_rows_impl(const Tensor& x, const Tensor& idx, Tensor& out) override;
  void add_inplace_impl(Tensor& a, const Tensor& b) override;
  void moe_route_impl(const Tensor& logits, int top_k, bool normalize, Tensor& ids,
                      Tensor& weights) override;
  void moe_experts_impl(const Tensor& x, const MoeExperts& experts, const Tensor& ids,
                        const Tensor& weights, Tensor& out) override;

 private:
  void* pinned(size_t bytes);  // the staging buffer, after the previous upload finished

  int device_ = 0;
  int num_sms_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<DeviceAllocator> alloc_;
  std::unique_ptr<Gemm> gemm_;
  void* pinned_ = nullptr;  // host staging for upload_batch / sample inputs and outputs
  size_t pinned_bytes_ = 0;
  cudaEvent_t staged_ = nullptr;  // recorded after each copy out of pinned_
  PrefillImpl prefill_impl_ = PrefillImpl::kSimple;
  DecodeImpl decode_impl_ = DecodeImpl::kV2;
};

}  // namespace nanovllm::cuda
