// Decode attention v2 (attention_decode_v2.cu) against a float64 reference and against v1,
// through the launchers (kernels.h), for what the BF16 conformance table does not reach: F32
// activations, many splits and none (large batches), GQA groups split over blocks (G = 9, 16),
// block_size 1, graph-style and understated max_seqlen_k, missing blocks, and the v1 fallbacks
// (head_dim 96, unaligned caches). Rows of no sequence must stay untouched (NaN poison).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/cuda/kernels.h"

namespace nanovllm::gputest {
namespace {

struct DecodeShape {
  std::string name;
  DType act;
  int Hq, Hkv, D, block_size;
  std::vector<int> ctx;        // context length per sequence (0: a padding row, no key)
  int max_seqlen_k = -1;       // -1: the true maximum
  bool misalign = false;       // caches start one element past a 16-byte boundary (v1 fallback)
  bool holes = false;          // some table entries -1 / past the cache; one sequence has none
  bool skip_last_row = false;  // num_tokens = B - 1: the last sequence has no row in the batch
};

std::vector<int> contexts(int B, int lo, int hi, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> u(lo, hi);
  std::vector<int> v(static_cast<size_t>(B));
  for (auto& x : v) x = u(g);
  return v;
}

std::vector<DecodeShape> shapes() {
  std::vector<DecodeShape> s;
  for (DType act : {DType::BF16, DType::F32}) {
    const std::string t = act == DType::BF16 ? "bf16" : "f32";
    // Qwen3-0.6B heads; few sequences (many splits), a batch (one split), long contexts.
    s.push_back({"qwen_few_" + t, act, 16, 8, 128, 16, {1, 2, 15, 16, 17, 255, 256, 257, 1500}});
    // 300 x 8 blocks: more than one wave, no split (block_size 16 keeps the cache ~50M elements).
    s.push_back({"qwen_batch_" + t, act, 16, 8, 128, 16, contexts(300, 1, 300, 1)});
    s.push_back({"qwen_bs256_" + t, act, 16, 8, 128, 256, {1, 255, 256, 257, 700}});
    s.push_back({"qwen_long_" + t, act, 16, 8, 128, 16, {5000, 3, 9000}});
    for (int G : {1, 3, 5, 8, 9, 16})
      s.push_back({"g" + std::to_string(G) + "_d64_" + t, act, 2 * G, 2, 64, 16,
                   {1, 31, 32, 33, 600}});
    s.push_back({"bs1_" + t, act, 8, 2, 128, 1, {1, 7, 300}});
    DecodeShape hint{"hint_max_model_len_" + t, act, 16, 4, 128, 16, {3, 700, 2049}};
    hint.max_seqlen_k = 40960;
    s.push_back(hint);
    hint.name = "hint_understated_" + t;
    hint.max_seqlen_k = 1;
    s.push_back(hint);
    DecodeShape holes{"missing_blocks_" + t, act, 8, 2, 64, 16, {40, 33, 20, 9, 0, 300}};
    holes.holes = true;
    s.push_back(holes);
    DecodeShape last{"last_row_outside_batch_" + t, act, 8, 2, 128, 16, {40, 300, 5}};
    last.skip_last_row = true;
    s.push_back(last);
    s.push_back({"fallback_d96_" + t, act, 8, 2, 96, 16, {1, 33, 600}});
    DecodeShape mis{"fallback_unaligned_" + t, act, 8, 2, 128, 16, {1, 33, 600}};
    mis.misalign = true;
    s.push_back(mis);
  }
  return s;
}

class DecodeV2 : public ::testing::TestWithParam<DecodeShape> {};

TEST_P(DecodeV2, MatchesReferenceAndV1) {
  NV_NEED_GPU();
  cuda::CudaBackend& be = *backend();
  const DecodeShape& c = GetParam();
  const int B = int(c.ctx.size()), Hq = c.Hq, Hkv = c.Hkv, D = c.D, bs = c.block_size;
  const int T = c.skip_last_row ? B - 1 : B;
  const int W = (Hq + 2 * Hkv) * D, G = Hq / Hkv;
  int stride = 1, total_blocks = 0, maxk = 0;
  for (int x : c.ctx) {
    stride = std::max(stride, (x + bs - 1) / bs);
    total_blocks += (x + bs - 1) / bs;
    maxk = std::max(maxk, x);
  }
  const int num_blocks = total_blocks + 2;
  const int64_t num_slots = int64_t(num_blocks) * bs;
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng());
  std::vector<int32_t> table(size_t(B) * stride, -1);
  for (int b = 0, next = 0; b < B; ++b)
    for (int j = 0; j < (c.ctx[size_t(b)] + bs - 1) / bs; ++j)
      table[size_t(b) * stride + j] = ids[size_t(next++)];
  if (c.holes) {  // an entry -1, one past the cache, a context past the table, a bare sequence
    table[size_t(0) * stride + 1] = -1;
    table[size_t(1) * stride + 0] = num_blocks;
    for (int j = 0; j < stride; ++j) table[size_t(3) * stride + j] = -1;
  }
  std::vector<int32_t> ctx_lens(c.ctx.begin(), c.ctx.end()), cu(size_t(B) + 1);
  if (c.holes) ctx_lens[2] += 2 * bs;  // keys past the sequence's blocks (entries -1 / table end)
  std::iota(cu.begin(), cu.end(), 0);

  DevT qkv = random_tensor({std::max(T, 1), W}, c.act, -2.f, 2.f);
  // Caches with one spare leading element so `misalign` can shift them off 16-byte alignment.
  const int64_t cache_elems = num_slots * Hkv * D;
  DevT kc = random_tensor({cache_elems + 1}, c.act), vc = random_tensor({cache_elems + 1}, c.act);
  const int off = c.misalign ? 1 : 0;
  Tensor d_table = from_host_i32(table, {B, stride});
  Tensor d_ctx = from_host_i32(ctx_lens, {B});
  Tensor d_cu = from_host_i32(cu, {B + 1});

  cuda::AttentionArgs a;
  a.qkv = qkv.dev.raw();
  const size_t es = dtype_size(c.act);
  a.k_cache = static_cast<char*>(kc.dev.raw()) + off * es;
  a.v_cache = static_cast<char*>(vc.dev.raw()) + off * es;
  a.cu_seqlens_q = d_cu.data<int32_t>();
  a.context_lens = d_ctx.data<int32_t>();
  a.block_tables = d_table.data<int32_t>();
  a.num_seqs = B;
  a.num_tokens = T;
  a.max_seqlen_q = 1;
  a.max_seqlen_k = c.max_seqlen_k >= 0 ? c.max_seqlen_k : maxk;
  a.block_size = bs;
  a.table_stride = stride;
  a.Hq = Hq;
  a.Hkv = Hkv;
  a.D = D;
  a.num_slots = num_slots;
  a.scale = float(1.0 / std::sqrt(double(D)));
  a.act = c.act;
  const bool v2_runs = cuda::attention_decode_v2_supported(a);
  EXPECT_EQ(v2_runs, (D == 64 || D == 128) && !c.misalign) << "v2 coverage changed";

  // Reference [T, Hq * D] from the host values (rows of no sequence: NaN = must stay poisoned).
  std::vector<double> want(size_t(T) * Hq * D, std::nan(""));
  for (int b = 0; b < B && b < T; ++b) {
    std::vector<int64_t> slots;
    for (int j = 0; j < ctx_lens[size_t(b)]; ++j) {
      const int bi = j / bs;
      const int64_t blk = bi < stride ? table[size_t(b) * stride + bi] : -1;
      if (blk >= 0 && blk < num_blocks) slots.push_back(blk * bs + j % bs);
    }
    for (int h = 0; h < Hq; ++h) {
      double* o = &want[(size_t(b) * Hq + h) * D];
      std::fill(o, o + D, 0.0);
      if (slots.empty()) continue;
      const float* q = &qkv.host[size_t(b) * W + size_t(h) * D];
      const int kvh = h / G;
      std::vector<double> s(slots.size());
      double mx = -INFINITY, den = 0;
      for (size_t j = 0; j < slots.size(); ++j) {
        const float* kr = &kc.host[size_t(off) + (size_t(slots[j]) * Hkv + kvh) * D];
        double d = 0;
        for (int e = 0; e < D; ++e) d += double(q[e]) * kr[e];
        mx = std::max(mx, s[j] = d * a.scale);
      }
      for (auto& x : s) den += (x = std::exp(x - mx));
      for (size_t j = 0; j < slots.size(); ++j) {
        const float* vr = &vc.host[size_t(off) + (size_t(slots[j]) * Hkv + kvh) * D];
        for (int e = 0; e < D; ++e) o[e] += s[j] / den * vr[e];
      }
    }
  }

  const double tol = c.act == DType::F32 ? 2e-5 : 1e-2;
  std::vector<std::vector<float>> got(2);
  for (int impl = 0; impl < 2; ++impl) {
    SCOPED_TRACE(impl == 0 ? "v1" : "v2");
    Tensor out = poisoned({std::max(T, 1), Hq * D}, c.act);
    a.out = out.raw();
    const int64_t nf = impl == 0 ? cuda::decode_partials_floats(a, be.num_sms())
                                 : cuda::decode_v2_partials_floats(a, be.num_sms());
    Tensor partials = nf > 0 ? be.empty({nf}, DType::F32) : Tensor();
    float* pp = nf > 0 ? partials.data<float>() : nullptr;
    if (impl == 0) cuda::launch_attention_decode(a, pp, be.num_sms(), be.stream());
    else cuda::launch_attention_decode_v2(a, pp, be.num_sms(), be.stream());
    be.synchronize();
    got[size_t(impl)] = download(out);
    got[size_t(impl)].resize(want.size());
    std::vector<float> rows;
    std::vector<double> ref;
    size_t written = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i])) {
        written += !std::isnan(got[size_t(impl)][i]);
      } else {
        rows.push_back(got[size_t(impl)][i]);
        ref.push_back(want[i]);
      }
    }
    EXPECT_EQ(written, 0u) << "wrote rows that belong to no sequence";
    EXPECT_LE(rel_err(rows, ref), tol);
  }
  if (!v2_runs) {  // the fallback is v1 itself: identical bits
    for (size_t i = 0; i < want.size(); ++i) {
      if (!std::isnan(want[i])) {
        ASSERT_EQ(got[0][i], got[1][i]) << "element " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cuda, DecodeV2, ::testing::ValuesIn(shapes()),
    [](const ::testing::TestParamInfo<DecodeShape>& i) { return i.param.name; });

}  // namespace
}  // namespace nanovllm::gputest
