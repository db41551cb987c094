// GraphRunner: replaying captured decode graphs gives the same results as running eagerly,
// for batches padded up to their bucket.
#include "gpu_test_util.h"
#include "kernels/cuda/graph_runner.h"

namespace nanovllm::gputest {
namespace {

TEST(GpuGraphs, ReplayMatchesEager) {
  NV_NEED_GPU();
  auto* be = backend();
  const int64_t V = 300, H = 256;
  auto table = random_tensor({V, H}, DType::BF16);
  auto w = random_tensor({H}, DType::BF16, 0.5f, 1.5f);
  auto lm = random_tensor({V, H}, DType::BF16, -0.1f, 0.1f);
  // A miniature decode step: embed, norm, project to logits (F32).
  auto step = [&](const BatchTensors& b) {
    Tensor x = be->empty({b.num_tokens, H}, DType::BF16);
    be->embedding(b.input_ids, table.dev, 0, x);
    Tensor y = be->empty({b.num_tokens, H}, DType::BF16);
    be->rms_norm(x, w.dev, 1e-6f, y);
    Tensor logits = be->empty({b.num_tokens, V}, DType::F32);
    be->linear(y, lm.dev, nullptr, logits);
    return logits;
  };
  cuda::GraphRunner runner(*be, 40, 1024, 16);
  EXPECT_EQ(runner.buckets(), graph_batch_sizes(40));
  runner.capture(step);
  for (int n : {1, 3, 17, 32}) {
    HostBatch hb;
    hb.num_seqs = hb.num_tokens = n;
    hb.max_seqlen_q = 1;
    hb.max_seqlen_k = 5;
    hb.block_size = 16;
    hb.decode_only = true;
    hb.block_table_stride = 1;
    for (int i = 0; i < n; ++i) {
      hb.input_ids.push_back(int32_t(rng()() % V));
      hb.positions.push_back(4);
      hb.slot_mapping.push_back(-1);
      hb.context_lens.push_back(5);
      hb.block_tables.push_back(i);
      hb.cu_seqlens_q.push_back(i);
      hb.logits_indices.push_back(i);
    }
    hb.cu_seqlens_q.push_back(n);
    const auto got = download(runner.run(hb));
    const auto eager = download(step(be->upload_batch(hb)));
    ASSERT_EQ(got.size(), size_t(n) * V);
    // Not bitwise: cuBLASLt may pick another algorithm for the padded bucket's row count.
    const std::vector<double> want(eager.begin(), eager.end());
    EXPECT_LE(rel_err(got, want), 1e-2) << "batch " << n;
  }
  EXPECT_EQ(runner.bucket_for(33), -1);  // above the largest bucket (32): eager
}

}  // namespace
}  // namespace nanovllm::gputest
