// cuBLASLt GEMM for linear layers: out[T, N] = x[T, K] @ w[N, K]^T (+ bias[N]), fp32
// accumulation (CUBLAS_COMPUTE_32F). One handle and one workspace per instance; descriptors and
// the heuristic's algorithm are cached by (shape, dtypes, pointer alignments, bias mode).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "util/dtype.h"

namespace nanovllm::cuda {

class Gemm {
 public:
  // Products of T <= skinny_max_t (at most kSkinnyMaxT) rows that skinny_gemm_supported()
  // accepts go to the skinny kernel (gemm_skinny.cu) instead of cuBLASLt; 0: never.
  explicit Gemm(cudaStream_t stream, int64_t skinny_max_t = 0);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Supported (in -> out): BF16 -> BF16 / F32, F16 -> F16 / F32, F32 -> F32 (x and w share
  // `in`). With a bias of out's dtype the BIAS epilogue is used when cuBLASLt offers it;
  // otherwise (or for another bias dtype) a separate add kernel runs.
  void run(const void* x, const void* w, DType in, const void* bias, DType bias_dt, void* out,
           DType out_dt, int64_t T, int64_t N, int64_t K);
  static bool supported(DType in, DType out);
  size_t cached_plans() const { return plans_.size(); }
  int64_t skinny_calls() const { return skinny_calls_; }  // products the skinny kernel ran

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool bias_epilogue = false;
  };
  // (T, N, K, in, out, bias epilogue, alignment of x, w, out)
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, bool, int, int, int>;
  bool make_plan(const Key& k, Plan& p);
  static void destroy(Plan& p);

  cudaStream_t stream_;
  int64_t skinny_max_t_ = 0;
  int64_t skinny_calls_ = 0;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = size_t(32) << 20;
  std::map<Key, Plan> plans_;
};

}  // namespace nanovllm::cuda
