// Arithmetic ceilings of this CPU, for rooflines (bench_hw_limits): the rate at which the cores
// issue the instruction each kind of work needs, with no memory traffic (register operands,
// independent accumulator chains, so latency never stalls the pipes).
//   f32: FMA (vfmadd231ps), 2 flops per lane. Attention, norms and bf16 weights widened to f32
//        (the streaming bf16 kernel) run here.
//   int8: the widest u8 x s8 dot the CPU has: vpdpbusd (AVX-512 VNNI: 64 MACs per zmm op;
//         AVX-VNNI: 32 per ymm op), else AVX2's vpmaddubsw + vpmaddwd + vpaddd (32 MACs for
//         three ops), as the W8A8 / W4A8 kernels use. 2 ops per MAC.
// Each thread of the pool runs the loop at once; the figure is the pool's total (GFLOP/s or
// GOP/s). Header-only so the benchmark needs no library of its own.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/simd.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace nanovllm::bench {

constexpr int64_t kPeakIters = 1 << 22;

// 12 chains of FMA: more than latency (4-5 cycles) x pipes (2) on every x86 core we meet.
NV_TARGET_AVX2 inline float fma_chains_avx2(int64_t iters, float seed) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(seed * float(i + 1));
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  return cpu::hsum8(s);
}

NV_TARGET_AVX512 inline float fma_chains_avx512(int64_t iters, float seed) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(seed * float(i + 1));
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}

// The products do not depend on the accumulators, so the compiler would compute them once
// outside the loop (a first version measured vpaddd alone: 4x too high); an empty asm that
// "changes" u every iteration keeps all 4 products (distinct s per chain) inside it. 4 chains
// (the products do not wait on the 1-cycle add chains): 4 acc + 4 s + u + ones + the
// temporaries stay in the 16 ymm registers (8 and 6 chains spilled s operands to the stack).
NV_TARGET_AVX2 inline int dot_chains_avx2(int64_t iters, int seed) {
  __m256i acc[4], s[4];
  for (int i = 0; i < 4; ++i) acc[i] = _mm256_set1_epi32(seed + i);
  for (int i = 0; i < 4; ++i) s[i] = _mm256_set1_epi8(char(-2 - i));
  __m256i u = _mm256_set1_epi8(3);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t it = 0; it < iters; ++it) {
    asm volatile("" : "+x"(u));
    for (int i = 0; i < 4; ++i)
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(u, s[i]), ones));
  }
  __m256i t = acc[0];
  for (int i = 1; i < 4; ++i) t = _mm256_add_epi32(t, acc[i]);
  return _mm256_extract_epi32(t, 0) + _mm256_extract_epi32(t, 7);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) inline int dot_chains_avx512vnni(
    int64_t iters, int seed) {
  __m512i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(seed + i);
  __m512i u = _mm512_set1_epi8(3);
  const __m512i s = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iters; ++it) {
    asm volatile("" : "+v"(u));  // as in the AVX2 probe: no product may leave the loop
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], u, s);
  }
  __m512i t = acc[0];
  for (int i = 1; i < 12; ++i) t = _mm512_add_epi32(t, acc[i]);
  return _mm512_reduce_add_epi32(t);
}

__attribute__((target("avx2,avxvnni"))) inline int dot_chains_avxvnni(int64_t iters, int seed) {
  __m256i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_epi32(seed + i);
  __m256i u = _mm256_set1_epi8(3);
  const __m256i s = _mm256_set1_epi8(-2);
  for (int64_t it = 0; it < iters; ++it) {
    asm volatile("" : "+x"(u));
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], u, s);
  }
  __m256i t = acc[0];
  for (int i = 1; i < 12; ++i) t = _mm256_add_epi32(t, acc[i]);
  return _mm256_extract_epi32(t, 0) + _mm256_extract_epi32(t, 7);
}

struct ComputePeak {
  double f32_gflops = 0;  // all pool threads
  double int8_gops = 0;   // all pool threads, 2 ops per MAC
  std::string f32_isa, int8_isa;
};

// Best of 3 runs of every pool thread looping at once (4 Mi iterations: ~10-50 ms each).
inline ComputePeak measure_compute_peak(ThreadPool& pool) {
  const CpuFeatures& f = cpu_features();
  const bool avx512 = cpu::active_isa() == cpu::Isa::Avx512;
  ComputePeak p;
  std::vector<double> sink(size_t(pool.size()));  // results kept, so no loop is dead code
  auto best_rate = [&](double ops_per_iter, auto&& loop) {
    double best = 0;
    for (int r = 0; r < 3; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      pool.run_on_all([&](int t) { sink[size_t(t)] += double(loop(kPeakIters, t + 1)); });
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, ops_per_iter * double(kPeakIters) * pool.size() / s / 1e9);
    }
    return best;
  };
  if (avx512) {
    p.f32_isa = "avx512 fma";
    p.f32_gflops = best_rate(12 * 16 * 2, [](int64_t n, int s) { return fma_chains_avx512(n, float(s)); });
  } else if (f.avx2 && f.fma) {
    p.f32_isa = "avx2 fma";
    p.f32_gflops = best_rate(12 * 8 * 2, [](int64_t n, int s) { return fma_chains_avx2(n, float(s)); });
  }
  if (avx512 && f.avx512_vnni) {
    p.int8_isa = "avx512 vpdpbusd";
    p.int8_gops = best_rate(12 * 64 * 2, [](int64_t n, int s) { return dot_chains_avx512vnni(n, s); });
  } else if (f.avx_vnni && f.avx2) {
    p.int8_isa = "avx-vnni vpdpbusd";
    p.int8_gops = best_rate(12 * 32 * 2, [](int64_t n, int s) { return dot_chains_avxvnni(n, s); });
  } else if (f.avx2) {
    p.int8_isa = "avx2 vpmaddubsw+vpmaddwd";
    p.int8_gops = best_rate(4 * 32 * 2, [](int64_t n, int s) { return dot_chains_avx2(n, s); });
  }
  return p;
}

}  // namespace nanovllm::bench
