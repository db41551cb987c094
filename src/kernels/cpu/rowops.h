// Per-row helpers of the elementwise ops (elementwise.cc), vectorized with AVX-512 where the CPU
// has it, scalar otherwise. Why: a decode step runs them on every layer (2 norms, SiLU-and-mul,
// per-head q/k norm and RoPE); scalar, SiLU alone (std::exp on 3072 values per token and layer)
// cost ~0.9 ms per Qwen3-0.6B token, and 64x that in a B=64 decode step.
#pragma once
#include <cstdint>

namespace nanovllm::cpu {

// out = x / sqrt(mean(x^2) + eps) * w over H values; the sum of squares accumulates in f64
// (the one place rounding can pile up). out may alias x.
void rms_row(const float* x, const float* w, float eps, float* out, int64_t H);
// out[i] = silu(g[i]) * u[i], silu(v) = v / (1 + e^-v).
void silu_mul_row(const float* g, const float* u, float* out, int64_t n);
// Rotate-half RoPE in place on v[2 half]: (x1, x2) -> (x1 c - x2 s, x2 c + x1 s), c/s [half].
void rope_row(float* v, const float* c, const float* s, int half);

}  // namespace nanovllm::cpu
