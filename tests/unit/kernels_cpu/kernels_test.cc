// CPU kernels against naive f64 references on fresh random inputs (outputs poisoned with NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/backend.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/onednn_gemm.h"
#include "util/cpu_features.h"

using namespace nanovllm;

namespace {

std::mt19937 rng(12345);

Tensor rand_tensor(const Shape& s, DType dt, float scale = 1.f) {
  Tensor t = Tensor::empty(s, dt);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(size_t(t.numel()));
  for (auto& x : v) x = nd(rng);
  convert_f32_to(v.data(), t.raw(), dt, t.numel());
  return t;
}
void poison(Tensor& t) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
}
double max_rel_err(const std::vector<double>& ref, const float* got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num = std::max(num, std::abs(ref[i] - got[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return num / den;
}

}  // namespace

class LinearTest : public ::testing::TestWithParam<std::tuple<int, DType, int>> {};

TEST_P(LinearTest, MatchesNaive) {
  auto [M, wd, path] = GetParam();
  const int K = 200, N = 77;  // K not a multiple of 16: exercises the tails
  auto be = make_cpu_backend(2);
  Tensor x = rand_tensor({M, K}, DType::F32);
  Tensor w = rand_tensor({N, K}, wd, 0.1f);
  Tensor b = rand_tensor({N}, DType::F32);
  Tensor out = Tensor::empty({M, N}, DType::F32);
  poison(out);
  cpu::set_linear_path(path);
  be->linear(x, w, &b, out);
  cpu::set_linear_path(0);
  auto xf = to_f32_vector(x), wf = to_f32_vector(w), bf = to_f32_vector(b);
  // Batches of >= onednn_min_rows() rows with BF16 weights go through oneDNN, which rounds the
  // activations to bf16: the reference then uses the same rounded x.
  const bool rounds = wd == DType::BF16 && path == 0 && M >= cpu::onednn_min_rows() &&
                      cpu::onednn_bf16_supported(N, K);
  if (rounds)
    for (auto& v : xf) v = bf16_to_f32(f32_to_bf16(v));
  std::vector<double> ref(size_t(M * N));
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = bf[size_t(n)];
      for (int k = 0; k < K; ++k) s += double(xf[size_t(m * K + k)]) * wf[size_t(n * K + k)];
      ref[size_t(m * N + n)] = s;
    }
  EXPECT_LT(max_rel_err(ref, out.data<float>()), 1e-5)
      << "M=" << M << " path=" << path << (rounds ? " (oneDNN, bf16 activations)" : "");
}

INSTANTIATE_TEST_SUITE_P(Paths, LinearTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 8, 9, 33, 64, 65),
                                            ::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::Values(0, 2)));

// Naive causal attention for one sequence whose K/V live at positions 0..ctx-1 (dense copies).
struct AttnCase {
  int Hq, Hkv, D, bs;
  std::vector<std::pair<int, int>> seqs;  // (cached tokens, new tokens)
};

class PagedAttentionTest : public ::testing::TestWithParam<AttnCase> {};

TEST_P(PagedAttentionTest, MatchesNaive) {
  const AttnCase c = GetParam();
  auto be = make_cpu_backend(2);
  const int B = int(c.seqs.size()), D = c.D, row = (c.Hq + 2 * c.Hkv) * D;
  AttentionParams ap{c.Hq, c.Hkv, D, float(1.0 / std::sqrt(D))};
  // Random, shuffled physical blocks per sequence.
  int total_blocks = 0;
  for (auto [cached, n] : c.seqs) total_blocks += (cached + n + c.bs - 1) / c.bs;
  std::vector<int> phys(static_cast<size_t>(total_blocks));
  for (int i = 0; i < total_blocks; ++i) phys[size_t(i)] = i;
  std::shuffle(phys.begin(), phys.end(), rng);
  const int64_t slots = int64_t(total_blocks) * c.bs;
  Tensor kc = rand_tensor({slots, c.Hkv, D}, DType::F32);  // garbage where unused
  Tensor vc = rand_tensor({slots, c.Hkv, D}, DType::F32);

  HostBatch hb;
  hb.block_size = c.bs;
  hb.num_seqs = B;
  hb.cu_seqlens_q = {0};
  int max_blocks = 0;
  for (auto [cached, n] : c.seqs) max_blocks = std::max(max_blocks, (cached + n + c.bs - 1) / c.bs);
  hb.block_table_stride = max_blocks;
  hb.block_tables.assign(size_t(B * max_blocks), -1);
  int next = 0;
  // Full per-sequence K/V (positions 0..ctx-1) for the reference.
  std::vector<Tensor> fullk, fullv;
  std::vector<Tensor> qkv_parts;
  int T = 0;
  for (int b = 0; b < B; ++b) T += c.seqs[size_t(b)].second;
  Tensor qkv = rand_tensor({T, row}, DType::F32);
  int t = 0;
  for (int b = 0; b < B; ++b) {
    auto [cached, n] = c.seqs[size_t(b)];
    int ctx = cached + n, nb = (ctx + c.bs - 1) / c.bs;
    for (int i = 0; i < nb; ++i) hb.block_tables[size_t(b * max_blocks + i)] = phys[size_t(next++)];
    Tensor fk = rand_tensor({ctx, c.Hkv, D}, DType::F32), fv = rand_tensor({ctx, c.Hkv, D}, DType::F32);
    // Cached prefix goes straight into the cache; new tokens' K/V go into qkv (stored by store_kv).
    for (int p = 0; p < ctx; ++p) {
      int64_t slot = int64_t(hb.block_tables[size_t(b * max_blocks + p / c.bs)]) * c.bs + p % c.bs;
      if (p < cached) {
        std::memcpy(kc.data<float>() + slot * c.Hkv * D, fk.data<float>() + int64_t(p) * c.Hkv * D, size_t(c.Hkv * D) * 4);
        std::memcpy(vc.data<float>() + slot * c.Hkv * D, fv.data<float>() + int64_t(p) * c.Hkv * D, size_t(c.Hkv * D) * 4);
      } else {
        float* r = qkv.data<float>() + int64_t(t + p - cached) * row;
        std::memcpy(r + c.Hq * D, fk.data<float>() + int64_t(p) * c.Hkv * D, size_t(c.Hkv * D) * 4);
        std::memcpy(r + (c.Hq + c.Hkv) * D, fv.data<float>() + int64_t(p) * c.Hkv * D, size_t(c.Hkv * D) * 4);
        hb.slot_mapping.push_back(int32_t(slot));
      }
    }
    fullk.push_back(fk);
    fullv.push_back(fv);
    t += n;
    hb.cu_seqlens_q.push_back(t);
    hb.context_lens.push_back(ctx);
    hb.max_seqlen_q = std::max(hb.max_seqlen_q, n);
    hb.max_seqlen_k = std::max(hb.max_seqlen_k, ctx);
  }
  hb.num_tokens = T;
  for (int i = 0; i < T; ++i) hb.input_ids.push_back(0), hb.positions.push_back(0);
  BatchTensors bt = be->upload_batch(hb);
  be->store_kv(qkv, bt.slot_mapping, kc, vc, ap);
  Tensor out = Tensor::empty({T, c.Hq * D}, DType::F32);
  poison(out);
  be->attention(qkv, kc, vc, bt, ap, out);

  std::vector<double> ref(size_t(T) * c.Hq * D);
  t = 0;
  for (int b = 0; b < B; ++b) {
    auto [cached, n] = c.seqs[size_t(b)];
    const float* fk = fullk[size_t(b)].data<float>();
    const float* fv = fullv[size_t(b)].data<float>();
    for (int i = 0; i < n; ++i) {
      int qpos = cached + i;
      for (int h = 0; h < c.Hq; ++h) {
        int kh = h / (c.Hq / c.Hkv);
        const float* q = qkv.data<float>() + int64_t(t + i) * row + h * D;
        std::vector<double> s(static_cast<size_t>(qpos + 1));
        double mx = -1e300;
        for (int j = 0; j <= qpos; ++j) {
          double d = 0;
          for (int e = 0; e < D; ++e) d += double(q[e]) * fk[(int64_t(j) * c.Hkv + kh) * D + e];
          s[size_t(j)] = d * ap.scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        double z = 0;
        for (auto& v : s) z += (v = std::exp(v - mx));
        for (int e = 0; e < D; ++e) {
          double acc = 0;
          for (int j = 0; j <= qpos; ++j) acc += s[size_t(j)] * fv[(int64_t(j) * c.Hkv + kh) * D + e];
          ref[(size_t(t + i) * c.Hq + h) * D + e] = acc / z;
        }
      }
    }
    t += n;
  }
  EXPECT_LT(max_rel_err(ref, out.data<float>()), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PagedAttentionTest,
    ::testing::Values(AttnCase{4, 4, 16, 16, {{0, 1}}},                        // single token
                      AttnCase{8, 2, 32, 16, {{0, 37}, {16, 19}, {5, 15}}},     // prefix-cached prefill, GQA
                      AttnCase{4, 1, 64, 256, {{0, 300}, {100, 1}}},             // bs 256, decode
                      AttnCase{6, 3, 8, 32, {{40, 1}, {63, 1}, {64, 1}, {0, 2}}},  // decode at boundaries
                      // Qwen3-0.6B heads: AVX-512 tile kernel (full and partial 16-row groups,
                      // a 5-token chunk after a 300-token cached prefix)
                      AttnCase{16, 8, 128, 256, {{0, 77}, {300, 5}, {3, 1}}},
                      AttnCase{6, 3, 8, 32, {{0, 20}}},  // D % 16 != 0: tile kernel declines
                      // few-row (decode) kernel: 3 queries x G = 2 (6 rows, per-row causal
                      // limits), G = 4 decode across a block boundary, a 1-token prompt
                      AttnCase{4, 2, 32, 16, {{20, 3}, {0, 1}}},
                      AttnCase{8, 2, 48, 16, {{33, 1}, {15, 1}}}
                      ));

TEST(Norm, AddRmsNormMatchesNaive) {
  auto be = make_cpu_backend(2);
  const int T = 5, H = 96;
  Tensor x = rand_tensor({T, H}, DType::F32), res = rand_tensor({T, H}, DType::F32);
  Tensor w = rand_tensor({H}, DType::BF16);
  auto xf = to_f32_vector(x), rf = to_f32_vector(res), wf = to_f32_vector(w);
  be->add_rms_norm(x, res, w, 1e-6f);
  std::vector<double> ref(size_t(T * H)), refres(size_t(T * H));
  for (int t = 0; t < T; ++t) {
    double ss = 0;
    for (int i = 0; i < H; ++i) {
      double r = double(rf[size_t(t * H + i)]) + xf[size_t(t * H + i)];
      refres[size_t(t * H + i)] = r;
      ss += r * r;
    }
    double inv = 1.0 / std::sqrt(ss / H + 1e-6);
    for (int i = 0; i < H; ++i) ref[size_t(t * H + i)] = refres[size_t(t * H + i)] * inv * wf[size_t(i)];
  }
  EXPECT_LT(max_rel_err(ref, x.data<float>()), 1e-5);
  EXPECT_LT(max_rel_err(refres, res.data<float>()), 1e-6);
}

TEST(Rope, RotateHalfMatchesNaiveAndPosZeroIsIdentity) {
  auto be = make_cpu_backend(1);
  const int Hq = 2, Hkv = 1, D = 8, T = 3, maxp = 16;
  AttentionParams ap{Hq, Hkv, D, 1.f};
  Tensor qkv = rand_tensor({T, (Hq + 2 * Hkv) * D}, DType::F32);
  auto before = to_f32_vector(qkv);
  Tensor cs = Tensor::empty({maxp, D}, DType::F32);
  for (int p = 0; p < maxp; ++p)
    for (int i = 0; i < D / 2; ++i) {
      double f = std::pow(10000.0, -2.0 * i / D);
      cs.data<float>()[p * D + i] = float(std::cos(p * f));
      cs.data<float>()[p * D + D / 2 + i] = float(std::sin(p * f));
    }
  std::vector<int32_t> pos = {0, 5, 15};
  Tensor pt = Tensor::wrap(pos.data(), {T}, DType::I32);
  be->qk_norm_rope(qkv, pt, nullptr, nullptr, 1e-6f, cs, ap);
  const float* after = qkv.data<float>();
  const int row = (Hq + 2 * Hkv) * D;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < Hq + 2 * Hkv; ++h)
      for (int i = 0; i < D; ++i) {
        size_t o = size_t(t * row + h * D + i);
        double expect = before[o];
        if (h < Hq + Hkv) {  // q and k rotated, v untouched
          int j = i % (D / 2);
          double f = std::pow(10000.0, -2.0 * j / D), c = std::cos(pos[size_t(t)] * f),
                 s = std::sin(pos[size_t(t)] * f);
          double x1 = before[size_t(t * row + h * D + j)], x2 = before[size_t(t * row + h * D + j + D / 2)];
          expect = i < D / 2 ? x1 * c - x2 * s : x2 * c + x1 * s;
        }
        EXPECT_NEAR(after[o], expect, 1e-5) << "t=" << t << " h=" << h << " i=" << i;
      }
}

// oneDNN bf16 path (prefill): equals the naive product of bf16-rounded activations and weights.
TEST(Linear, OnednnBf16MatchesRoundedNaive) {
  const int M = 130, K = 96, N = 50;
  // oneDNN is optional (the GPU bundle's build has none): then linear takes the exact F32 path.
  if (!cpu::onednn_bf16_supported(N, K)) GTEST_SKIP() << "oneDNN absent or rejects the shape/ISA";
  auto be = make_cpu_backend(2);
  Tensor x = rand_tensor({M, K}, DType::F32);
  Tensor w = rand_tensor({N, K}, DType::BF16, 0.1f);
  Tensor out = Tensor::empty({M, N}, DType::F32);
  poison(out);
  cpu::set_linear_path(3);
  be->linear(x, w, nullptr, out);
  cpu::set_linear_path(0);
  auto xf = to_f32_vector(x), wf = to_f32_vector(w);
  std::vector<double> ref(size_t(M * N));
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k)
        s += double(bf16_to_f32(f32_to_bf16(xf[size_t(m * K + k)]))) * wf[size_t(n * K + k)];
      ref[size_t(m * N + n)] = s;
    }
  EXPECT_LT(max_rel_err(ref, out.data<float>()), 1e-5);
}

// The M == 1 bf16 decode kernel (K % 32 == 0, with and without a 32-wide tail after the
// 64-wide main loop; odd row counts).
TEST(Linear, DecodeBf16FastPathMatchesNaive) {
  for (int K : {32, 320, 352}) {
    const int N = 103;
    auto be = make_cpu_backend(2);
    Tensor x = rand_tensor({1, K}, DType::F32);
    Tensor w = rand_tensor({N, K}, DType::BF16, 0.1f);
    Tensor b = rand_tensor({N}, DType::F32);
    Tensor out = Tensor::empty({1, N}, DType::F32);
    poison(out);
    be->linear(x, w, &b, out);
    auto xf = to_f32_vector(x), wf = to_f32_vector(w), bf = to_f32_vector(b);
    std::vector<double> ref(static_cast<size_t>(N));
    for (int n = 0; n < N; ++n) {
      double s = bf[size_t(n)];
      for (int k = 0; k < K; ++k) s += double(xf[size_t(k)]) * wf[size_t(n * K + k)];
      ref[size_t(n)] = s;
    }
    EXPECT_LT(max_rel_err(ref, out.data<float>()), 1e-5) << "K = " << K;
  }
}

// to_device copies large weights into the huge-page arena (same bytes, new address) and leaves
// small tensors where they are.
TEST(CpuBackend, ToDeviceCopiesLargeWeightsIntoArena) {
  auto be = make_cpu_backend(2);
  Tensor big = rand_tensor({300, 256}, DType::BF16);  // 150 KiB
  Tensor small = rand_tensor({64}, DType::F32);
  Tensor big_d = be->to_device(big), small_d = be->to_device(small);
  EXPECT_NE(big_d.raw(), big.raw());
  EXPECT_EQ(big_d.shape(), big.shape());
  EXPECT_EQ(big_d.dtype(), DType::BF16);
  EXPECT_EQ(std::memcmp(big_d.raw(), big.raw(), big.nbytes()), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big_d.raw()) % 64, 0u);
  EXPECT_EQ(small_d.raw(), small.raw());
  Tensor big2 = be->to_device(big);  // packed after the first in the same chunk
  EXPECT_EQ(std::memcmp(big2.raw(), big.raw(), big.nbytes()), 0);
  EXPECT_GE(static_cast<char*>(big2.raw()) - static_cast<char*>(big_d.raw()),
            static_cast<ptrdiff_t>(big.nbytes()));
}
