// cpu::store_kv into an int8 cache writes, for every (token, head) row and on every ISA cap
// (this binary runs once per NANOVLLM_ISA), exactly the bytes of the reference
// quantize_kv_row: rows with ties at .5 after scaling, zeros, a NaN, infinities, denormals, and
// head sizes with a vector tail; tokens are stored in parallel, slot -1 and out-of-range slots
// are skipped (kernels/README.md's defensive rules).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/kv_cache_int8.h"
#include "util/thread_pool.h"

namespace nanovllm {
namespace {

// A row of D values of kind k (0: uniform; 1: ties: integers + 0.5 scaled so max|x| -> 127;
// 2: all zero; 3: one NaN; 4: +inf; 5: -inf and tiny; 6: denormals; 7: huge).
void fill_row(float* x, int D, int k, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  for (int d = 0; d < D; ++d) x[d] = u(rng);
  const float inf = std::numeric_limits<float>::infinity();
  switch (k) {
    case 1:  // x * (127 / 127) = x: the max is 127, the others half-integers (round to even)
      for (int d = 0; d < D; ++d) x[d] = float(int(rng() % 253) - 126) + 0.5f;
      x[rng() % unsigned(D)] = 127.f;
      break;
    case 2: for (int d = 0; d < D; ++d) x[d] = 0.f; break;
    case 3: x[rng() % unsigned(D)] = std::numeric_limits<float>::quiet_NaN(); break;
    case 4: x[rng() % unsigned(D)] = inf; break;
    case 5:
      for (int d = 0; d < D; ++d) x[d] *= 1e-30f;
      x[rng() % unsigned(D)] = -inf;
      break;
    case 6: for (int d = 0; d < D; ++d) x[d] *= 1e-39f; break;
    case 7: for (int d = 0; d < D; ++d) x[d] *= 1e37f; break;
    default: break;
  }
}

TEST(StoreKv, Int8RowsEqualTheReferenceOnEveryIsa) {
  std::mt19937 rng(7);
  for (int D : {128, 64, 80, 40, 24}) {
    const int Hq = 4, Hkv = 2, T = 96, W = (Hq + 2 * Hkv) * D, row = D + kKvInt8ScaleBytes;
    const int64_t slots = 2 * T;
    std::vector<float> qkv(size_t(T) * W);
    for (int t = 0; t < T; ++t)
      for (int part = 0; part < Hq + 2 * Hkv; ++part)
        fill_row(&qkv[size_t(t) * W + size_t(part) * D], D, (t + part) % 8, rng);
    std::vector<int32_t> slot(static_cast<size_t>(T));
    for (int t = 0; t < T; ++t) slot[size_t(t)] = int32_t((t * 37) % slots);  // distinct, shuffled
    slot[5] = -1;                     // padding: not stored
    slot[9] = int32_t(slots + 3);     // out of range: not stored
    Tensor k = Tensor::zeros({slots, Hkv, row}, kKvCacheInt8), v = Tensor::zeros({slots, Hkv, row}, kKvCacheInt8);
    AttentionParams p{Hq, Hkv, D, 1.f};
    ThreadPool pool(2);
    cpu::store_kv(Tensor::wrap(qkv.data(), {T, W}, DType::F32), Tensor::wrap(slot.data(), {T}, DType::I32),
                  k, v, p, pool);
    std::vector<int8_t> want(static_cast<size_t>(row)), zero(static_cast<size_t>(row), 0);
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < Hkv; ++h)
        for (int which = 0; which < 2; ++which) {
          const float* x = &qkv[size_t(t) * W + size_t(Hq + which * Hkv + h) * D];
          const int s = slot[size_t(t)];
          if (s < 0 || s >= slots) continue;
          quantize_kv_row(x, D, want.data());
          const int8_t* got = (which ? v : k).data<int8_t>() + (int64_t(s) * Hkv + h) * row;
          ASSERT_EQ(std::memcmp(got, want.data(), size_t(row)), 0)
              << "D " << D << " token " << t << " head " << h << (which ? " V" : " K");
        }
    // The skipped tokens' slots (5 * 37, 9 * 37 mod slots) were written by no token: still zero.
    for (int t : {5, 9}) {
      const int64_t s = (t * 37) % slots;
      EXPECT_EQ(std::memcmp(k.data<int8_t>() + s * Hkv * row, zero.data(), size_t(row)), 0) << t;
    }
  }
}

}  // namespace
}  // namespace nanovllm
