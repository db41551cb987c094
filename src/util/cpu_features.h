// Run-time ISA detection: kernels pick AVX-512 / AVX2 / scalar paths from this, so one binary
// runs on AVX2-only machines. NANOVLLM_ISA=avx2|scalar caps the level (for testing fallbacks).
#pragma once
#include <string>

namespace nanovllm {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512_bf16 = false;
  bool amx_bf16 = false;
  std::string summary() const;  // e.g. "avx512_bf16"
};
const CpuFeatures& cpu_features();

}  // namespace nanovllm
