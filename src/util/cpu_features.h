// Run-time ISA detection: kernels pick AVX-512 / AVX2 / scalar paths from this, so one binary
// runs on AVX2-only machines. NANOVLLM_ISA (BackendOptions::isa) caps the level, for testing
// fallbacks; the cap is process-wide (kernels read these flags directly), fixed at first use:
//   avxvnni: no AVX-512 (AVX2, plus AVX-VNNI where the CPU has it)
//   avx2:    no AVX-512 and no AVX-VNNI
//   scalar:  nothing beyond the x86-64 baseline
#pragma once
#include <string>

#include "nanovllm/backend_options.h"

namespace nanovllm {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512_bf16 = false;
  bool avx512_vnni = false, avx_vnni = false;  // int8 dot products (vpdpbusd)
  bool amx_bf16 = false;
  std::string summary() const;  // e.g. "avx512_bf16"
};
const CpuFeatures& cpu_features();
// The cap in effect: a backend whose options ask for another one refuses to start.
IsaCap cpu_isa_cap();

}  // namespace nanovllm
