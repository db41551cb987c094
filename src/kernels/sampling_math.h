// Per-element formulas of the sampling op, shared by the CPU sampler (g++) and the CUDA sampler
// (nvcc, C++17), so both backends compute bit-identical processed logits. The op itself is
// described in kernels/sampling.h.
#pragma once
#include <cstdint>

#include "util/philox.h"

namespace nanovllm {

// vLLM's rule, the only place it lives: temperatures below 1e-5 are greedy (1 / T would
// overflow the scaled logits). NaN counts as greedy.
constexpr float kGreedyTemperatureBelow = 1e-5f;
NV_HD bool is_greedy_temperature(float t) { return !(t >= kGreedyTemperatureBelow); }

// One token's sparse edit of a row, merged on the host from the row's suppression list,
// logit_bias and penalty history (build_logit_edits in kernels/sampling.h): at most one edit
// per token, so the edits of a row can be applied in parallel.
struct LogitEdit {
  int32_t token = 0;
  uint32_t flags = 0;   // kEditSuppress | kEditSeen
  float bias = 0.f;     // logit_bias (0 if none)
  int32_t count = 0;    // occurrences among the generated tokens (frequency / presence)
};
constexpr uint32_t kEditSuppress = 1u;  // min_tokens not reached: EOS / stop token -> -inf
constexpr uint32_t kEditSeen = 2u;      // in prompt or output: repetition penalty applies

struct Penalties {
  float presence = 0.f;    // subtracted once if generated at least once
  float frequency = 0.f;   // subtracted per generated occurrence
  float repetition = 1.f;  // > 0; logit > 0 divided, else multiplied
};

// Rounded float ops that nvcc may not contract into an FMA, so host and device agree bit for bit.
NV_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
NV_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
NV_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// vLLM's order: suppression (-inf), then logit_bias, then repetition, frequency, presence
// (all before temperature). z is the raw logit with NaN already mapped to -inf; -inf stays -inf.
NV_HD float apply_logit_edit(float z, const LogitEdit& e, const Penalties& p) {
  if (e.flags & kEditSuppress) return -INFINITY;
  z = add_rn(z, e.bias);
  if (e.flags & kEditSeen) z = z > 0.f ? div_rn(z, p.repetition) : mul_rn(z, p.repetition);
  if (e.count > 0)
    z = add_rn(z, -add_rn(mul_rn(p.frequency, float(e.count)), p.presence));
  return z;
}

// Bit i of a row's allowed-token mask (ceil(V / 32) words; bit i of word i / 32 set = allowed).
NV_HD bool token_allowed(const uint32_t* mask, int64_t i) {
  return mask == nullptr || ((mask[i >> 5] >> (i & 31)) & 1u) != 0;
}

// Maps a float to a uint32 whose unsigned order equals the float order (-0 < +0; NaN
// unspecified): exact radix selection of top-k / top-p thresholds on the device.
NV_HD uint32_t float_order_key(float f) {
  uint32_t u;
#if defined(__CUDA_ARCH__)
  u = __float_as_uint(f);
#else
  __builtin_memcpy(&u, &f, 4);
#endif
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
NV_HD float float_from_order_key(uint32_t k) {
  uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
  float f;
#if defined(__CUDA_ARCH__)
  f = __uint_as_float(u);
#else
  __builtin_memcpy(&f, &u, 4);
#endif
  return f;
}

}  // namespace nanovllm
