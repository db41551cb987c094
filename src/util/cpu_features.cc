#include "util/cpu_features.h"

#include <cpuid.h>

#include "nanovllm/backend_options.h"

namespace nanovllm {

static CpuFeatures detect(IsaCap cap) {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid_count(1, 0, &a, &b, &c, &d)) return f;
  bool osxsave = c & (1u << 27);
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  unsigned long long xcr0 = 0;
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  }
  bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6;
  bool tmm = (xcr0 & (3ull << 17)) == (3ull << 17);
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = ymm && (b & (1u << 5));
    f.avx512f = zmm && (b & (1u << 16));
    f.avx512bw = zmm && (b & (1u << 30));
    f.avx512vl = zmm && (b & (1u << 31));
    f.amx_bf16 = tmm && (d & (1u << 22));
    f.avx512_vnni = f.avx512f && (c & (1u << 11));
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avx512_bf16 = f.avx512f && (a & (1u << 5));
    f.avx_vnni = ymm && (a & (1u << 4));
  }
  f.fma = f.fma && ymm;
  {
    const bool vnni = cap == IsaCap::kAvxVnni, avx2 = cap == IsaCap::kAvx2,
               scalar = cap == IsaCap::kScalar;
    if (vnni || avx2 || scalar)
      f.avx512f = f.avx512bw = f.avx512vl = f.avx512_bf16 = f.amx_bf16 = f.avx512_vnni = false;
    if (avx2 || scalar) f.avx_vnni = false;
    if (scalar) f.avx2 = f.fma = f.f16c = false;
  }
  return f;
}

// The cap is read once: kernels dispatch on these flags without a context parameter, so the
// level is a property of the process (BackendOptions::isa must agree, see cpu_isa_cap()).
IsaCap cpu_isa_cap() {
  static const IsaCap cap = backend_options_from_env().isa;
  return cap;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect(cpu_isa_cap());
  return f;
}

std::string CpuFeatures::summary() const {
  if (amx_bf16) return "amx_bf16";
  if (avx512_bf16) return "avx512_bf16";
  if (avx512f) return "avx512";
  if (avx2 && fma) return "avx2";
  return "scalar";
}

}  // namespace nanovllm
