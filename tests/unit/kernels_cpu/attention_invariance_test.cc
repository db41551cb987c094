// Batch invariance of the CPU paged attention (docs/determinism.md), per KV cache type (f32,
// bf16, int8) and with a sliding window: a query row's output must be bitwise the same whether
// it is computed as a decode alone on one thread, in a large decode batch on two threads (where
// items take several KV heads), inside a whole prefill, inside prefill chunks of odd sizes, or as
// one of a sequence's verification rows (speculative decoding) next to other sequences' decodes.
//
// The cache holds every position's K/V up front (store_kv of one token is independent of the
// others, so this is what the engine's incremental stores leave); the batches below only read it
// (slot_mapping -1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/simd.h"
#include "kernels/kv_cache_int8.h"

using namespace nanovllm;

namespace {

constexpr int Hq = 8, Hkv = 4, D = 64, kBlock = 16;
constexpr int W = (Hq + 2 * Hkv) * D;

// A query segment: queries at positions [pos, pos + n) of sequence `seq`.
struct Seg {
  int seq, pos, n;
};

class Fixture {
 public:
  Fixture(DType kv, int window) : window_(window) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    int total_blocks = 0;
    for (int len : lens_) total_blocks += (len + kBlock - 1) / kBlock;
    std::vector<int32_t> ids(static_cast<size_t>(total_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    stride_ = 0;
    for (int len : lens_) stride_ = std::max(stride_, (len + kBlock - 1) / kBlock);
    size_t next = 0;
    for (int len : lens_) {
      std::vector<int32_t> table(size_t(stride_), -1);
      for (int j = 0; j < (len + kBlock - 1) / kBlock; ++j) table[size_t(j)] = ids[next++];
      tables_.push_back(table);
      std::vector<float> rows(size_t(len) * W);
      for (auto& x : rows) x = u(rng);
      qkv_.push_back(rows);
    }
    const int64_t slots = int64_t(total_blocks) * kBlock, row = kv_cache_row_elems(kv, D);
    k_ = Tensor::zeros({slots, Hkv, row}, kv);
    v_ = Tensor::zeros({slots, Hkv, row}, kv);
    for (size_t s = 0; s < lens_.size(); ++s) {  // store every position
      const int len = lens_[s];
      Tensor q = Tensor::wrap(qkv_[s].data(), {len, W}, DType::F32);
      std::vector<int32_t> slot(static_cast<size_t>(len));
      for (int p = 0; p < len; ++p)
        slot[size_t(p)] = tables_[s][size_t(p / kBlock)] * kBlock + p % kBlock;
      ThreadPool pool(2);
      cpu::store_kv(q, Tensor::wrap(slot.data(), {len}, DType::I32), k_, v_, params(), pool);
    }
  }

  int num_seqs() const { return int(lens_.size()); }
  int len(int s) const { return lens_[size_t(s)]; }

  AttentionParams params() const {
    AttentionParams p{Hq, Hkv, D, 0.125f};
    p.sliding_window = window_;
    return p;
  }

  // Output rows [sum n, Hq * D] of one attention call over the segments.
  std::vector<float> run(const std::vector<Seg>& segs, int threads) const {
    std::vector<float> q;
    std::vector<int32_t> cu = {0}, ctx, slot, table;
    for (const Seg& g : segs) {
      const float* src = qkv_[size_t(g.seq)].data();
      q.insert(q.end(), src + size_t(g.pos) * W, src + size_t(g.pos + g.n) * W);
      cu.push_back(cu.back() + g.n);
      ctx.push_back(g.pos + g.n);
      table.insert(table.end(), tables_[size_t(g.seq)].begin(), tables_[size_t(g.seq)].end());
      for (int i = 0; i < g.n; ++i) slot.push_back(-1);
    }
    const int T = cu.back(), B = int(segs.size());
    BatchTensors bt;
    bt.cu_seqlens_q = Tensor::wrap(cu.data(), {B + 1}, DType::I32);
    bt.context_lens = Tensor::wrap(ctx.data(), {B}, DType::I32);
    bt.block_tables = Tensor::wrap(table.data(), {B, stride_}, DType::I32);
    bt.slot_mapping = Tensor::wrap(slot.data(), {T}, DType::I32);
    bt.num_seqs = B;
    bt.num_tokens = T;
    bt.block_size = kBlock;
    for (const Seg& g : segs) bt.max_seqlen_q = std::max(bt.max_seqlen_q, g.n);
    bt.max_seqlen_k = *std::max_element(ctx.begin(), ctx.end());
    std::vector<float> out(size_t(T) * Hq * D, -1.f);
    Tensor o = Tensor::wrap(out.data(), {T, Hq * D}, DType::F32);
    ThreadPool pool(threads);
    cpu::paged_attention(Tensor::wrap(q.data(), {T, W}, DType::F32), k_, v_, bt, params(), o, pool);
    return out;
  }

  // The row of position `pos` of sequence `seq` computed as a decode alone on one thread.
  std::vector<float> alone(int seq, int pos) const { return run({{seq, pos, 1}}, 1); }

  // Every row of `segs` run together equals its alone() row bitwise.
  void expect_rows_alone(const std::vector<Seg>& segs, int threads, const std::string& what) const {
    const std::vector<float> got = run(segs, threads);
    size_t r = 0;
    for (const Seg& g : segs)
      for (int i = 0; i < g.n; ++i, ++r) {
        const std::vector<float> want = alone(g.seq, g.pos + i);
        EXPECT_EQ(0, std::memcmp(want.data(), &got[r * Hq * D], want.size() * 4))
            << what << ": sequence " << g.seq << " position " << g.pos + i;
      }
  }

 private:
  // Long enough for several key chunks (int8 / bf16 / f32 of 4 heads of 64: 248 / 256 / 256).
  std::vector<int> lens_ = {700, 37, 300, 1, 1100, 64, 65, 16, 17, 250, 3, 129, 900, 33, 5, 400};
  int window_, stride_ = 0;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<std::vector<float>> qkv_;
  Tensor k_, v_;
};

class AttentionInvariance : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(AttentionInvariance, RowsEqualTheirDecodeAlone) {
  const auto [kv, window] = GetParam();
  const Fixture f(kv, window);
  // A decode batch of every sequence (items of several KV heads), two threads.
  std::vector<Seg> decode;
  for (int s = 0; s < f.num_seqs(); ++s) decode.push_back({s, f.len(s) - 1, 1});
  f.expect_rows_alone(decode, 2, "decode batch");
  // Whole prefills (tiles of 16 queries), one of them with a long sequence's decode.
  f.expect_rows_alone({{1, 0, 37}, {4, 1099, 1}, {6, 0, 65}}, 2, "prefill");
  // Chunked prefill: chunks of 5, 3, 19 and 10 queries of a 37-token prompt, and a chunk that
  // ends a 400-token prompt after a cached prefix of 389.
  f.expect_rows_alone({{1, 0, 5}, {15, 389, 11}}, 1, "chunk");
  f.expect_rows_alone({{1, 5, 3}, {0, 690, 10}}, 2, "chunk");
  f.expect_rows_alone({{1, 8, 19}}, 1, "chunk");
  f.expect_rows_alone({{1, 27, 10}, {12, 899, 1}}, 2, "chunk");
  // Verification rows: 5 queries of one sequence among other sequences' decodes.
  f.expect_rows_alone({{2, 299, 1}, {4, 1090, 5}, {9, 249, 1}, {12, 895, 5}}, 2, "verification");
}

INSTANTIATE_TEST_SUITE_P(KvTypes, AttentionInvariance,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16,
                                                              kKvCacheInt8),
                                            ::testing::Values(0, 100)),
                         [](const ::testing::TestParamInfo<std::tuple<DType, int>>& info) {
                           const DType dt = std::get<0>(info.param);
                           return std::string(dt == kKvCacheInt8  ? "int8"
                                              : dt == DType::BF16 ? "bf16"
                                                                  : "f32") +
                                  (std::get<1>(info.param) ? "_window" : "");
                         });

}  // namespace
