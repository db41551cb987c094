// The backend conformance table (tests/conformance) against the CUDA backend, activations BF16.
// Prefill attention cases run twice: with the CUDA-core kernel and with the tensor-core one
// (which falls back to the CUDA-core kernel where it does not apply: head_dim other than 64 /
// 128). Decode attention cases (decode-only batches) run twice too: with decode kernel v1 and
// with v2 (which falls back to v1 where it does not apply: head_dim other than 64 / 128,
// unaligned caches). Run alone with: gpu_tests --gtest_filter='Cuda/*'
#include "conformance.h"
#include "gpu_test_util.h"

namespace nanovllm::conformance {
namespace {

using Prefill = cuda::CudaBackend::PrefillImpl;
using Decode = cuda::CudaBackend::DecodeImpl;

class CudaConformance : public ::testing::TestWithParam<Case> {};

TEST_P(CudaConformance, MatchesReference) {
  NV_NEED_GPU();
  cuda::CudaBackend& be = *gputest::backend();
  const Prefill saved_prefill = be.prefill_impl();
  const Decode saved_decode = be.decode_impl();
  struct Run {
    Prefill prefill;
    Decode decode;
    const char* what;
  };
  std::vector<Run> runs = {{Prefill::kSimple, Decode::kV1, "CUDA-core prefill kernel, decode v1"}};
  if (GetParam().prefill_attention)
    runs.push_back({Prefill::kTensorCore, Decode::kV1, "tensor-core prefill kernel"});
  if (GetParam().decode_attention) runs.push_back({Prefill::kSimple, Decode::kV2, "decode v2"});
  for (const Run& r : runs) {
    SCOPED_TRACE(r.what);
    be.set_prefill_impl(r.prefill);
    be.set_decode_impl(r.decode);
    Harness hx(be, GetParam().name);
    GetParam().run(hx);
    be.synchronize();  // a kernel fault surfaces in the case that caused it
  }
  be.set_prefill_impl(saved_prefill);
  be.set_decode_impl(saved_decode);
}

// CudaBackend::act_dtype() is BF16 (the table is built before any device is opened).
INSTANTIATE_TEST_SUITE_P(Cuda, CudaConformance, ::testing::ValuesIn(all_cases(DType::BF16)),
                         CaseName());

}  // namespace
}  // namespace nanovllm::conformance
