#include "kernels/cuda/gemm.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.h"

namespace nanovllm::cuda {
namespace {

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::F16:
      return CUDA_R_16F;
    case DType::BF16:
      return CUDA_R_16BF;
    default:
      NV_THROW("no cuBLASLt type for ", dtype_name(d));
  }
}

// Largest power of two <= 256 dividing the address (what cuBLASLt's alignment preferences
// compare against; views such as Tensor::rows() may be less aligned than an allocation).
int alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int al = 256;
  while (al > 1 && (a % al)) al >>= 1;
  return al;
}

constexpr size_t kMaxPlans = 4096;

}  // namespace

Gemm::Gemm(cudaStream_t stream, int64_t skinny_max_t)
    : stream_(stream), skinny_max_t_(skinny_max_t) {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
  CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

Gemm::~Gemm() {
  for (auto& kv : plans_) destroy(kv.second);
  if (workspace_) (void)cudaFree(workspace_);
  if (handle_) (void)cublasLtDestroy(handle_);
}

void Gemm::destroy(Plan& p) {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  if (p.op) cublasLtMatmulDescDestroy(p.op);
  p = Plan{};
}

bool Gemm::supported(DType in, DType out) {
  if (in == DType::BF16) return out == DType::BF16 || out == DType::F32;
  if (in == DType::F16) return out == DType::F16 || out == DType::F32;
  if (in == DType::F32) return out == DType::F32;
  return false;
}

// Row-major out[T, N] = x[T, K] w[N, K]^T is, in cuBLAS's column-major terms,
// out^T [N, T] = w' ^T x' with w' = w viewed as [K, N] (ld K) and x' = x as [K, T] (ld K):
// A = w (transa = T), B = x (transb = N), m = N, n = T, k = K, ldc = N. The BIAS epilogue adds
// a length-m vector, i.e. bias[N].
bool Gemm::make_plan(const Key& key, Plan& p) {
  const auto [T, N, K, in_i, out_i, bias_epi, al_x, al_w, al_o] = key;
  const cudaDataType_t in = cuda_type(DType(in_i)), out = cuda_type(DType(out_i));
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (bias_epi) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    const cudaDataType_t bt = out;
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
  }
  p.bias_epilogue = bias_epi;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, in, uint64_t(K), uint64_t(N), K));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, in, uint64_t(K), uint64_t(T), K));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, out, uint64_t(N), uint64_t(T), N));

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  const uint32_t ax = uint32_t(al_x), aw = uint32_t(al_w), ao = uint32_t(al_o);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aw,
                                       sizeof(aw));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ax,
                                       sizeof(ax));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ao,
                                       sizeof(ao));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ao,
                                       sizeof(ao));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    destroy(p);
    return false;
  }
  p.algo = res.algo;
  return true;
}

void Gemm::run(const void* x, const void* w, DType in, const void* bias, DType bias_dt, void* out,
               DType out_dt, int64_t T, int64_t N, int64_t K) {
  NV_CHECK(supported(in, out_dt), "cuBLASLt GEMM does not support ", dtype_name(in), " -> ",
           dtype_name(out_dt));
  if (T == 0 || N == 0) return;
  NV_CHECK(K > 0, "GEMM with K = 0");
  if (T <= skinny_max_t_ && skinny_gemm_supported(x, w, in, bias, bias_dt, out, out_dt, T, N, K)) {
    launch_skinny_gemm(x, w, bias, bias_dt, out, out_dt, T, N, K, stream_);
    ++skinny_calls_;
    return;
  }
  bool want_epi = bias != nullptr && bias_dt == out_dt;
  Plan* plan = nullptr;
  for (int attempt = 0; attempt < 2 && !plan; ++attempt) {
    const Key key{
        T, N, K, int(in), int(out_dt), want_epi, alignment(x), alignment(w), alignment(out)};
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      plan = &it->second;
      break;
    }
    if (plans_.size() >= kMaxPlans) {  // many distinct prefill lengths: start over
      for (auto& kv : plans_) destroy(kv.second);
      plans_.clear();
    }
    Plan p;
    if (make_plan(key, p)) {
      plan = &plans_.emplace(key, p).first->second;
    } else if (want_epi) {
      want_epi = false;  // no algorithm with the fused bias: plain GEMM + add kernel
    } else {
      NV_THROW("cuBLASLt found no algorithm for GEMM T=", T, " N=", N, " K=", K, " ",
               dtype_name(in), " -> ", dtype_name(out_dt));
    }
  }
  NV_CHECK(plan != nullptr, "cuBLASLt plan failed for T=", T, " N=", N, " K=", K);
  if (plan->bias_epilogue)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof(bias)));
  const float alpha = 1.f, beta = 0.f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, plan->op, &alpha, w, plan->a, x, plan->b, &beta, out,
                              plan->c, out, plan->c, &plan->algo, workspace_, workspace_bytes_,
                              stream_));
  if (bias && !plan->bias_epilogue) launch_add_bias(out, out_dt, bias, bias_dt, T, N, stream_);
}

}  // namespace nanovllm::cuda
