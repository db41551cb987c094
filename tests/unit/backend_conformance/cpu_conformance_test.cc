// The backend conformance table (tests/conformance) against the CPU backend. ctest also runs
// it with NANOVLLM_ISA=avx2 and =scalar, so every CPU kernel path meets the same table.
#include <memory>

#include "conformance.h"
#include "kernels/backend_factory.h"

namespace nanovllm::conformance {
namespace {

Backend& cpu_backend() {
  static std::unique_ptr<Backend> be = make_cpu_backend(2);
  return *be;
}

class CpuConformance : public ::testing::TestWithParam<Case> {};

TEST_P(CpuConformance, MatchesReference) {
  Harness hx(cpu_backend(), GetParam().name);
  GetParam().run(hx);
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuConformance, ::testing::ValuesIn(all_cases(DType::F32)), CaseName());

}  // namespace
}  // namespace nanovllm::conformance
