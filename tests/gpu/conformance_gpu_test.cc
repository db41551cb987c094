// The backend conformance table (tests/conformance) against the CUDA backend, activations BF16.
// Prefill attention cases run twice: with the CUDA-core kernel and with the tensor-core one
// (which falls back to the CUDA-core kernel where it does not apply: head_dim other than 64 /
// 128). Run alone with: gpu_tests --gtest_filter='Cuda/*'
#include "conformance.h"
#include "gpu_test_util.h"

namespace nanovllm::conformance {
namespace {

using Impl = cuda::CudaBackend::PrefillImpl;

class CudaConformance : public ::testing::TestWithParam<Case> {};

TEST_P(CudaConformance, MatchesReference) {
  NV_NEED_GPU();
  cuda::CudaBackend& be = *gputest::backend();
  const Impl saved = be.prefill_impl();
  std::vector<Impl> impls = {Impl::kSimple};
  if (GetParam().prefill_attention) impls.push_back(Impl::kTensorCore);
  for (Impl impl : impls) {
    SCOPED_TRACE(impl == Impl::kSimple ? "CUDA-core prefill kernel" : "tensor-core prefill kernel");
    be.set_prefill_impl(impl);
    Harness hx(be, GetParam().name);
    GetParam().run(hx);
    be.synchronize();  // a kernel fault surfaces in the case that caused it
  }
  be.set_prefill_impl(saved);
}

// CudaBackend::act_dtype() is BF16 (the table is built before any device is opened).
INSTANTIATE_TEST_SUITE_P(Cuda, CudaConformance, ::testing::ValuesIn(all_cases(DType::BF16)),
                         CaseName());

}  // namespace
}  // namespace nanovllm::conformance
