// GCC 12's _mm512_reduce_add_ps triggers a false -Wuninitialized inside its own header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/cpu/bf16_dot_probe.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

#include "kernels/cpu/simd.h"
#include "util/cpu_features.h"

namespace nanovllm::cpu {

namespace {

// 12 independent accumulators cover a 4-6 cycle latency at 2 issues per cycle, so each loop
// measures issue rate, not latency. kIters * 12 instructions: ~1 ms at 3 GHz.
constexpr int kIters = 1 << 18;
constexpr int kReps = 5;  // the fastest of 5 each (a preempted repetition only ever looks slower)

template <class F>
double time_ns(F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

#define NV_ACC12(OP) \
  OP(a0) OP(a1) OP(a2) OP(a3) OP(a4) OP(a5) OP(a6) OP(a7) OP(a8) OP(a9) OP(a10) OP(a11)

// Each accumulator starts from its own value and passes through an empty asm every iteration, so
// the compiler can neither merge the identical chains nor drop them; the sum is returned.
#define NV_KEEP12 \
  __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), \
                   "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11))
NV_TARGET_AVX512 float fma_loop(float seed) {
  __m512 x = _mm512_set1_ps(seed), y = _mm512_set1_ps(0.999f);
  float init = seed;
#define NV_INIT(a) __m512 a = _mm512_set1_ps(init += 1.f);
  NV_ACC12(NV_INIT)
#define NV_STEP(a) a = _mm512_fmadd_ps(a, y, x);
  for (int i = 0; i < kIters; ++i) {
    NV_ACC12(NV_STEP)
    NV_KEEP12;
  }
#define NV_SUM(a) s = _mm512_add_ps(s, a);
  __m512 s = _mm512_setzero_ps();
  NV_ACC12(NV_SUM)
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) float dpbf16_loop(float seed) {
  __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3c00);
  float init = seed;
  NV_ACC12(NV_INIT)
#define NV_STEP_BF(a) a = _mm512_dpbf16_ps(a, x, y);
  for (int i = 0; i < kIters; ++i) {
    NV_ACC12(NV_STEP_BF)
    NV_KEEP12;
  }
  __m512 s = _mm512_setzero_ps();
  NV_ACC12(NV_SUM)
  return _mm512_reduce_add_ps(s);
}
#undef NV_INIT
#undef NV_STEP
#undef NV_STEP_BF
#undef NV_SUM
#undef NV_ACC12
#undef NV_KEEP12

Bf16DotProbe measure() {
  Bf16DotProbe p;
  const CpuFeatures& f = cpu_features();
  p.amx_bf16 = f.amx_bf16;
  if (active_isa() != Isa::Avx512) return p;
  volatile float sink = 0;
  const double macs_fma = double(kIters) * 12 * 16, macs_bf = double(kIters) * 12 * 32;
  fma_loop(1.f);  // wake the core's wide units (AVX-512 licence) before timing
  // The two loops alternate, so a time slice lost to another process (a busy core) hits both
  // alike instead of one whole series.
  double t_fma = 1e300, t_bf = 1e300;
  for (int r = 0; r < kReps; ++r) {
    t_fma = std::min(t_fma, time_ns([&] { sink = sink + fma_loop(1.f); }));
    if (f.avx512_bf16) t_bf = std::min(t_bf, time_ns([&] { sink = sink + dpbf16_loop(1.f); }));
  }
  p.fma_macs_per_ns = macs_fma / t_fma;
  if (f.avx512_bf16) p.dpbf16_macs_per_ns = macs_bf / t_bf;
  return p;
}

}  // namespace

const Bf16DotProbe& bf16_dot_probe() {
  static const Bf16DotProbe p = measure();
  return p;
}

}  // namespace nanovllm::cpu
