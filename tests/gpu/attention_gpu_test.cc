// Paged attention (prefill, prefix-cached prefill, decode) against a double-precision CPU
// reference. K/V live in a randomly permuted set of cache blocks, so block-table indexing is
// exercised, and block ids beyond what a sequence uses hold unrelated data.
#include <algorithm>
#include <numeric>

#include "gpu_test_util.h"

namespace nanovllm::gputest {
namespace {

struct Seq {
  int sq, ctx;  // new tokens, keys after the step (cached prefix = ctx - sq)
};

struct Case {
  std::vector<Seq> seqs;
  int Hq, Hkv, D, block_size;
  bool decode = false;
  int max_seqlen_k = -1;  // override of the batch's max_seqlen_k (-1: the true maximum)
};

std::string describe(const Case& c) {
  std::string s = "Hq=" + std::to_string(c.Hq) + " Hkv=" + std::to_string(c.Hkv) +
                  " D=" + std::to_string(c.D) + " bs=" + std::to_string(c.block_size) +
                  (c.decode ? " decode" : " prefill") + " seqs:";
  for (auto& q : c.seqs) s += " (" + std::to_string(q.sq) + "," + std::to_string(q.ctx) + ")";
  return s;
}

void check_attention(const Case& c) {
  auto* be = backend();
  const int B = int(c.seqs.size()), D = c.D, Hq = c.Hq, Hkv = c.Hkv, bs = c.block_size;
  const int G = Hq / Hkv, W = (Hq + 2 * Hkv) * D;
  int T = 0, max_q = 0, max_k = 0, max_blocks = 0, total_blocks = 0;
  for (auto& q : c.seqs) {
    T += q.sq;
    max_q = std::max(max_q, q.sq);
    max_k = std::max(max_k, q.ctx);
    const int nb = (q.ctx + bs - 1) / bs;
    max_blocks = std::max(max_blocks, nb);
    total_blocks += nb;
  }
  const int num_blocks = total_blocks + 3;
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng());

  HostBatch hb;
  hb.num_seqs = B;
  hb.num_tokens = T;
  hb.max_seqlen_q = max_q;
  hb.max_seqlen_k = c.max_seqlen_k > 0 ? c.max_seqlen_k : max_k;
  hb.block_size = bs;
  hb.block_table_stride = max_blocks;
  hb.decode_only = c.decode;
  hb.input_ids.assign(T, 0);
  hb.slot_mapping.assign(T, -1);
  hb.block_tables.assign(size_t(B) * max_blocks, -1);
  hb.cu_seqlens_q.push_back(0);
  int next = 0;
  for (int b = 0; b < B; ++b) {
    const auto& q = c.seqs[b];
    hb.cu_seqlens_q.push_back(hb.cu_seqlens_q.back() + q.sq);
    hb.context_lens.push_back(q.ctx);
    for (int i = 0; i < q.sq; ++i) hb.positions.push_back(q.ctx - q.sq + i);
    for (int j = 0; j < (q.ctx + bs - 1) / bs; ++j)
      hb.block_tables[size_t(b) * max_blocks + j] = ids[next++];
  }
  BatchTensors batch = be->upload_batch(hb);

  auto qkv = random_tensor({T, W}, DType::BF16, -2.f, 2.f);
  auto kc = random_tensor({int64_t(num_blocks) * bs, Hkv, D}, DType::BF16);
  auto vc = random_tensor({int64_t(num_blocks) * bs, Hkv, D}, DType::BF16);
  const float scale = 1.f / std::sqrt(float(D));
  // Prefill runs both kernels (CUDA-core and tensor-core); decode has one.
  using Impl = cuda::CudaBackend::PrefillImpl;
  std::vector<Impl> impls = {Impl::kSimple};
  if (!c.decode) impls.push_back(Impl::kTensorCore);
  std::vector<std::vector<float>> got;
  const Impl saved = be->prefill_impl();
  for (Impl impl : impls) {
    be->set_prefill_impl(impl);
    Tensor out = poisoned({T, Hq * D}, DType::BF16);
    be->attention(qkv.dev, kc.dev, vc.dev, batch, AttentionParams{Hq, Hkv, D, scale}, out);
    got.push_back(download(out));
  }
  be->set_prefill_impl(saved);

  std::vector<double> want(size_t(T) * Hq * D);
  std::vector<double> s;
  for (int b = 0; b < B; ++b) {
    const auto& q = c.seqs[b];
    const int t0 = hb.cu_seqlens_q[b];
    for (int i = 0; i < q.sq; ++i) {
      const int last = q.ctx - q.sq + i;  // inclusive key limit
      for (int h = 0; h < Hq; ++h) {
        const int kvh = h / G;
        const float* qv = &qkv.host[size_t(t0 + i) * W + size_t(h) * D];
        s.assign(last + 1, 0.0);
        double mx = -INFINITY;
        for (int k = 0; k <= last; ++k) {
          const int64_t slot =
              int64_t(hb.block_tables[size_t(b) * max_blocks + k / bs]) * bs + k % bs;
          const float* kv = &kc.host[(size_t(slot) * Hkv + kvh) * D];
          double d = 0;
          for (int e = 0; e < D; ++e) d += double(qv[e]) * kv[e];
          s[k] = d * scale;
          mx = std::max(mx, s[k]);
        }
        double den = 0;
        for (auto& x : s) den += (x = std::exp(x - mx));
        double* o = &want[size_t(t0 + i) * Hq * D + size_t(h) * D];
        for (int k = 0; k <= last; ++k) {
          const int64_t slot =
              int64_t(hb.block_tables[size_t(b) * max_blocks + k / bs]) * bs + k % bs;
          const float* vv = &vc.host[(size_t(slot) * Hkv + kvh) * D];
          const double p = s[k] / den;
          for (int e = 0; e < D; ++e) o[e] += p * vv[e];
        }
      }
    }
  }
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LE(rel_err(got[i], want), 1e-2)
        << describe(c)
        << (impls[i] == Impl::kSimple ? " [simple kernel]" : " [tensor-core kernel]");
}

TEST(GpuAttention, PrefillVarlen) {
  NV_NEED_GPU();
  check_attention({{{1, 1}, {17, 17}, {100, 100}, {300, 300}}, 8, 2, 128, 16});
  check_attention({{{64, 64}, {65, 65}, {3, 3}}, 8, 8, 64, 16});
}

TEST(GpuAttention, PrefixCachedPrefill) {
  NV_NEED_GPU();
  check_attention({{{5, 200}, {64, 1000}, {1, 33}, {40, 40}}, 4, 4, 64, 256});
  check_attention({{{33, 70}, {128, 128}, {7, 300}}, 16, 2, 128, 256});  // GQA group of 8
  check_attention({{{16, 8192}, {1, 8192}}, 4, 2, 128, 16});             // long cached prefix
}

TEST(GpuAttention, LongPrefill) {
  NV_NEED_GPU();
  check_attention({{{2048, 2048}}, 2, 1, 64, 256});
  check_attention({{{1000, 1500}}, 4, 2, 128, 16});
}

TEST(GpuAttention, Decode) {
  NV_NEED_GPU();
  std::vector<Seq> ctxs = {{1, 1}, {1, 15}, {1, 16}, {1, 17}, {1, 300}, {1, 1000}, {1, 8192}};
  check_attention({ctxs, 16, 4, 128, 16, true});
  check_attention({ctxs, 8, 8, 64, 256, true});
  check_attention({ctxs, 16, 1, 128, 16, true});         // 16 query heads per KV head
  check_attention({{{1, 5000}}, 32, 8, 128, 16, true});  // one long sequence: many splits
}

TEST(GpuAttention, DecodeWithGraphStyleMaxLen) {
  NV_NEED_GPU();
  // CUDA graphs capture with max_seqlen_k = max_model_len: most partitions are empty.
  check_attention({{{1, 3}, {1, 700}, {1, 2049}}, 16, 4, 128, 16, true, 40960});
  // An understated max_seqlen_k must still attend to every key.
  check_attention({{{1, 3}, {1, 700}, {1, 2049}}, 16, 4, 128, 16, true, 1});
}

TEST(GpuAttention, PrefillKernelOnDecodeShapes) {
  NV_NEED_GPU();
  check_attention({{{1, 1}, {1, 77}, {1, 4000}}, 8, 2, 128, 16, false});
}

}  // namespace
}  // namespace nanovllm::gputest
