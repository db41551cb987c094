// row_reduce.h's scans equal the scalar loops that define them, on every ISA cap (this binary
// runs once per NANOVLLM_ISA): NaN anywhere, +0 and -0 at the maximum in either order, -inf,
// +inf, ties, all-NaN and empty rows, and every length around the vector widths.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/row_reduce.h"

namespace nanovllm {
namespace {

float max_ref(const std::vector<float>& x) {
  float m = -std::numeric_limits<float>::infinity();
  for (float v : x) m = std::max(m, v);
  return m;
}
int argmax_ref(const std::vector<float>& x) {
  int best = 0;
  float bv = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < int(x.size()); ++i)
    if (x[size_t(i)] > bv) bv = x[size_t(i)], best = i;
  return best;
}
int first_not_below_ref(const std::vector<float>& x, int i, float t) {
  for (; i < int(x.size()); ++i)
    if (!(x[size_t(i)] < t)) return i;
  return int(x.size());
}

TEST(RowReduce, ScansEqualTheirScalarDefinitions) {
  std::mt19937 rng(11);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  int cases = 0;
  for (int n : {0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000, 151936}) {
    for (int kind = 0; kind < 9; ++kind) {
      std::vector<float> x(static_cast<size_t>(n));
      std::uniform_real_distribution<float> u(-5.f, 5.f);
      for (auto& v : x) v = kind == 8 ? float(int(rng() % 3) - 2) : u(rng);  // 8: many ties at 0
      auto at = [&](unsigned r) -> float& { return x[r % unsigned(n)]; };
      if (n > 0) switch (kind) {
          case 1: at(rng()) = nan; at(rng()) = nan; break;
          case 2: for (auto& v : x) v = -std::fabs(v); at(rng()) = -0.f; at(rng()) = 0.f; break;
          case 3: for (auto& v : x) v = -std::fabs(v) - 1.f; at(rng()) = 0.f; at(rng()) = -0.f; break;
          case 4: for (auto& v : x) v = nan; break;
          case 5: for (auto& v : x) v = -inf; at(rng()) = nan; break;
          case 6: at(rng()) = inf; at(rng()) = nan; break;
          case 7: { const float top = x[0]; for (int r = 0; r < 3; ++r) at(rng()) = top + 100.f; } break;
          default: break;
        }
      const float m = cpu::max_f32(x.data(), n), mr = max_ref(x);
      ASSERT_EQ(std::bit_cast<uint32_t>(m), std::bit_cast<uint32_t>(mr)) << "n " << n << " kind " << kind;
      ASSERT_EQ(cpu::argmax_f32(x.data(), n), argmax_ref(x)) << "n " << n << " kind " << kind;
      for (float t : {-inf, -1.f, 0.f, 2.5f, 4.9f, inf})
        for (int i0 : {0, 1, n / 2, n})
          ASSERT_EQ(cpu::first_not_below(x.data(), i0, n, t), first_not_below_ref(x, i0, t))
              << "n " << n << " kind " << kind << " t " << t << " from " << i0;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 16 * 9);
}

}  // namespace
}  // namespace nanovllm
