// Vocabulary-length scans of the sampler, vectorized (AVX-512 / AVX2 / scalar by active_isa())
// with results defined by the scalar loops they replace, bit for bit on every ISA:
//   max_f32:      m = -inf; for i: m = std::max(m, x[i])   (NaN skipped; of +0 and -0 at the
//                 maximum, the one met first)
//   argmax_f32:   the lowest index of the maximum (x[i] > best, from best = -inf; NaN never
//                 wins); 0 when no element exceeds -inf
//   first_not_below(x, i, n, t): the first j in [i, n) with !(x[j] < t) (NaN included), else n
//   first_equal_f32(x, n, v): the first j with x[j] == v, else n (argmax_f32 when v is the
//                 row's maximum, already known: the sampler's race)
// A 151,936-token row took ~0.3 ms per scan as a serial maxss / cmov chain (3% of bench.py's
// run in sample_row, docs/perf.md).
#pragma once

namespace nanovllm::cpu {

float max_f32(const float* x, int n);
int argmax_f32(const float* x, int n);
int first_not_below(const float* x, int i, int n, float t);
int first_equal_f32(const float* x, int n, float v);

}  // namespace nanovllm::cpu
