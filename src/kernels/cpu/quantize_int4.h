// The int4 group quantizer behind quantize.cc (internal to kernels/cpu).
#pragma once
#include <xmmintrin.h>

#include <cstdint>

namespace nanovllm::cpu {

// One int4 group of g weights (g % 8 == 0) -> q[0..g) in [0, 15], the f16 scale (and min, for
// zero points), chosen to minimize the group's squared error:
//   symmetric:   w = s (q - 8), starting from s = w_extreme / -8 (the largest-magnitude weight
//                is exactly -8 steps, so the range [-8, 7] is used in full);
//   zero points: w = s q + m, starting from m = min(w), s = (max - min) / 15.
// Candidates clip the range by 0-20% in steps of 4% (outliers cost less than coarse steps for
// the rest), then one least-squares refit of (s[, m]) for the chosen integers. Rounding is to
// nearest even; the AVX2 and scalar evaluations give the same result.
void quantize_group_int4(const float* w, int g, bool zp, uint8_t* q, uint16_t* scale,
                         uint16_t* min);

// Nearest integer, ties to even (cvtss2si under the default rounding mode).
inline int round_nearest(float v) { return _mm_cvt_ss2si(_mm_set_ss(v)); }

}  // namespace nanovllm::cpu
