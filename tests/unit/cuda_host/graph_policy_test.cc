#include "kernels/cuda/graph_policy.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace nanovllm {
namespace {

TEST(CudaGraphPolicy, BucketList) {
  std::vector<int> want = {1, 2, 4, 8};
  for (int b = 16; b <= 512; b += 16) want.push_back(b);
  EXPECT_EQ(graph_batch_sizes(512), want);
  EXPECT_EQ(graph_batch_sizes(4096), want);  // capped at 512
  EXPECT_EQ(graph_batch_sizes(1), std::vector<int>({1}));
  EXPECT_EQ(graph_batch_sizes(5), std::vector<int>({1, 2, 4}));
  EXPECT_EQ(graph_batch_sizes(40), std::vector<int>({1, 2, 4, 8, 16, 32}));
  EXPECT_THROW(graph_batch_sizes(0), Error);
}

TEST(CudaGraphPolicy, BucketForBatch) {
  EXPECT_EQ(graph_bucket_for(1), 1);
  EXPECT_EQ(graph_bucket_for(3), 4);
  EXPECT_EQ(graph_bucket_for(8), 8);
  EXPECT_EQ(graph_bucket_for(9), 16);
  EXPECT_EQ(graph_bucket_for(17), 32);
  EXPECT_EQ(graph_bucket_for(512), 512);
  EXPECT_EQ(graph_bucket_for(513), -1);
  const auto small = graph_batch_sizes(40);
  EXPECT_EQ(graph_bucket_for(32, small), 32);
  EXPECT_EQ(graph_bucket_for(33, small), -1);
  EXPECT_THROW(graph_bucket_for(0), Error);
  // Every batch maps to the smallest bucket that holds it.
  const auto all = graph_batch_sizes(512);
  for (int b = 1; b <= 512; ++b) {
    const int k = graph_bucket_for(b, all);
    ASSERT_GE(k, b);
    auto it = std::find(all.begin(), all.end(), k);
    ASSERT_NE(it, all.end());
    if (it != all.begin()) {
      ASSERT_LT(*(it - 1), b);
    }
  }
}

TEST(CudaGraphPolicy, BlockTableWidthHoldsMaxModelLen) {
  for (int len : {1, 15, 16, 17, 4096, 40960})
    for (int bs : {16, 32, 256}) {
      const int w = graph_block_table_width(len, bs);
      EXPECT_GE(int64_t(w) * bs, len);
      EXPECT_EQ(w, len / bs + 1);
    }
  EXPECT_THROW(graph_block_table_width(0, 16), Error);
}

TEST(CudaGraphPolicy, StagingLayoutIsAlignedAndDisjoint) {
  const auto l = DecodeStagingLayout::make(48, 257);
  std::vector<std::pair<int64_t, int64_t>> spans = {
      {l.input_ids, 48},    {l.positions, 48},      {l.slot_mapping, 48},      {l.context_lens, 48},
      {l.cu_seqlens_q, 49}, {l.logits_indices, 48}, {l.block_tables, 48 * 257}};
  std::sort(spans.begin(), spans.end());
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].first % 16, 0);
    if (i + 1 < spans.size()) {
      EXPECT_LE(spans[i].first + spans[i].second, spans[i + 1].first);
    }
  }
  EXPECT_GE(l.total, spans.back().first + spans.back().second);
  EXPECT_EQ(l.total % 16, 0);
  EXPECT_EQ(l.bytes_for(48), (l.block_tables + 48 * 257) * 4);
  EXPECT_LT(l.bytes_for(1), l.bytes_for(2));
}

TEST(CudaGraphPolicy, FillStagingPadsTheBucket) {
  const int width = 4, stride = 3;
  const auto l = DecodeStagingLayout::make(8, width);
  std::vector<int32_t> buf(l.total, 12345);
  const int32_t ids[] = {7, 8, 9}, pos[] = {10, 20, 30}, slots[] = {100, -1, 300},
                ctx[] = {11, 21, 31};
  const int32_t tables[] = {1, 2, -1, 3, -1, -1, 4, 5, 6};
  fill_decode_staging(l, 4, 3, ids, pos, slots, ctx, tables, stride, buf.data());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(buf[l.input_ids + i], ids[i]);
    EXPECT_EQ(buf[l.positions + i], pos[i]);
    EXPECT_EQ(buf[l.slot_mapping + i], slots[i]);
    EXPECT_EQ(buf[l.context_lens + i], ctx[i]);
    for (int j = 0; j < stride; ++j)
      EXPECT_EQ(buf[l.block_tables + i * width + j], tables[i * stride + j]);
    EXPECT_EQ(buf[l.block_tables + i * width + 3], -1);
  }
  // Padding row 3: stores nothing, attends to nothing.
  EXPECT_EQ(buf[l.slot_mapping + 3], -1);
  EXPECT_EQ(buf[l.context_lens + 3], 0);
  EXPECT_EQ(buf[l.input_ids + 3], 0);
  for (int j = 0; j < width; ++j) EXPECT_EQ(buf[l.block_tables + 3 * width + j], -1);
  for (int i = 0; i <= 4; ++i) EXPECT_EQ(buf[l.cu_seqlens_q + i], i);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(buf[l.logits_indices + i], i);
  EXPECT_EQ(buf[l.input_ids + 4], 12345);  // beyond the bucket: untouched
  EXPECT_THROW(fill_decode_staging(l, 2, 3, ids, pos, slots, ctx, tables, stride, buf.data()),
               Error);
  // A table wider than the graph's with a real block past the width is refused.
  const int32_t wide[] = {1, 2, 3, 4, 5};
  EXPECT_THROW(fill_decode_staging(l, 1, 1, ids, pos, slots, ctx, wide, 5, buf.data()), Error);
  const int32_t wide_ok[] = {1, 2, 3, 4, -1};
  EXPECT_NO_THROW(fill_decode_staging(l, 1, 1, ids, pos, slots, ctx, wide_ok, 5, buf.data()));
}

// A decode batch of n sequences as ModelRunner::prepare builds it (block tables `stride` wide,
// sequence i using blocks 10i.. for its first `used` entries).
HostBatch decode_batch(int n, int stride, int used, int block_size = 16) {
  HostBatch hb;
  hb.num_seqs = hb.num_tokens = n;
  hb.block_size = block_size;
  hb.block_table_stride = stride;
  hb.decode_only = true;
  hb.max_seqlen_q = 1;
  hb.cu_seqlens_q.push_back(0);
  for (int i = 0; i < n; ++i) {
    hb.input_ids.push_back(5);
    hb.positions.push_back(used * block_size - 1);
    hb.slot_mapping.push_back(i * block_size);
    hb.context_lens.push_back(used * block_size);
    hb.cu_seqlens_q.push_back(i + 1);
    hb.logits_indices.push_back(i);
    for (int j = 0; j < stride; ++j) hb.block_tables.push_back(j < used ? 10 * i + j : -1);
  }
  hb.max_seqlen_k = used * block_size;
  return hb;
}

TEST(CudaGraphPolicy, ReplayBucketChoosesTheSmallestBucketOrEager) {
  const auto buckets = graph_batch_sizes(40);  // 1 2 4 8 16 32
  const int width = 5, bs = 16, len = 64;
  EXPECT_EQ(graph_replay_bucket(decode_batch(1, 3, 2), buckets, width, bs, len), 1);
  EXPECT_EQ(graph_replay_bucket(decode_batch(3, 3, 2), buckets, width, bs, len), 4);   // padded to 4
  EXPECT_EQ(graph_replay_bucket(decode_batch(17, 3, 2), buckets, width, bs, len), 32);
  EXPECT_EQ(graph_replay_bucket(decode_batch(32, 3, 2), buckets, width, bs, len), 32);
  // Above the largest bucket: eager.
  EXPECT_EQ(graph_replay_bucket(decode_batch(33, 3, 2), buckets, width, bs, len), -1);
  EXPECT_EQ(graph_replay_bucket(decode_batch(600, 3, 2), graph_batch_sizes(512), width, bs, len), -1);
  // Wider tables are fine while the extra entries are unused; a real block past the width is not.
  EXPECT_EQ(graph_replay_bucket(decode_batch(2, 8, 4), buckets, width, bs, len), 2);
  EXPECT_EQ(graph_replay_bucket(decode_batch(2, 8, 5), buckets, width, bs, 1000), 2);
  EXPECT_EQ(graph_replay_bucket(decode_batch(2, 8, 6), buckets, width, bs, 1000), -1);
  // A context longer than the captured max_model_len (64): eager.
  EXPECT_EQ(graph_replay_bucket(decode_batch(2, 3, 2), buckets, width, bs, 31), -1);
  EXPECT_EQ(graph_replay_bucket(decode_batch(2, 3, 2), buckets, width, bs, 32), 2);
  // Another block size than captured: eager.
  EXPECT_EQ(graph_replay_bucket(decode_batch(2, 3, 2, 32), buckets, width, bs, len), -1);
}

TEST(CudaGraphPolicy, ReplayNeedsADecodeOnlyBatchSamplingEverySequence) {
  const auto buckets = graph_batch_sizes(64);
  HostBatch hb = decode_batch(4, 3, 2);
  ASSERT_EQ(graph_replay_bucket(hb, buckets, 5, 16, 64), 4);
  HostBatch prefill = hb;  // one sequence with 2 query tokens
  prefill.decode_only = false;
  prefill.num_tokens = 5;
  EXPECT_EQ(graph_replay_bucket(prefill, buckets, 5, 16, 64), -1);
  HostBatch not_flagged = hb;
  not_flagged.decode_only = false;
  EXPECT_EQ(graph_replay_bucket(not_flagged, buckets, 5, 16, 64), -1);
  HostBatch skip = hb;  // a sequence that does not sample (partial prefill chunk)
  skip.logits_indices = {0, 1, 3};
  EXPECT_EQ(graph_replay_bucket(skip, buckets, 5, 16, 64), -1);
  HostBatch reordered = hb;
  reordered.logits_indices = {1, 0, 2, 3};
  EXPECT_EQ(graph_replay_bucket(reordered, buckets, 5, 16, 64), -1);
  HostBatch empty = decode_batch(0, 3, 2);
  EXPECT_EQ(graph_replay_bucket(empty, buckets, 5, 16, 64), -1);
  HostBatch bad_tables = hb;  // inconsistent arrays: eager, whose upload reports them
  bad_tables.block_tables.pop_back();
  EXPECT_EQ(graph_replay_bucket(bad_tables, buckets, 5, 16, 64), -1);
}

// A verification batch as ModelRunner::prepare builds it: sequence i has q[i] query rows (its
// token and q[i] - 1 drafts) at the end of a context of ctx[i] keys, every row sampled.
HostBatch verify_batch(const std::vector<int>& q, int stride, int block_size = 16) {
  HostBatch hb;
  const int n = int(q.size());
  hb.num_seqs = n;
  hb.block_size = block_size;
  hb.block_table_stride = stride;
  hb.cu_seqlens_q.push_back(0);
  int t = 0;
  for (int i = 0; i < n; ++i) {
    const int ctx = 20 + 3 * i;
    for (int r = 0; r < q[size_t(i)]; ++r, ++t) {
      hb.input_ids.push_back(100 + t);
      hb.positions.push_back(ctx - q[size_t(i)] + r);
      hb.slot_mapping.push_back(1000 * i + r);
      hb.logits_indices.push_back(t);
    }
    hb.cu_seqlens_q.push_back(t);
    hb.context_lens.push_back(ctx);
    hb.max_seqlen_q = std::max(hb.max_seqlen_q, q[size_t(i)]);
    hb.max_seqlen_k = std::max(hb.max_seqlen_k, ctx);
    for (int j = 0; j < stride; ++j) hb.block_tables.push_back(j < 2 ? 10 * i + j : -1);
  }
  hb.num_tokens = t;
  hb.decode_only = t == n;
  return hb;
}

TEST(CudaGraphPolicy, VerifyBucketList) {
  EXPECT_TRUE(verify_graph_batch_sizes(256, 8, 1).empty());  // no speculation
  EXPECT_TRUE(verify_graph_batch_sizes(256, 0, 5).empty());
  EXPECT_EQ(verify_graph_batch_sizes(256, 8, 5), std::vector<int>({1, 2, 4, 8}));
  EXPECT_EQ(verify_graph_batch_sizes(3, 8, 5), std::vector<int>({1, 2, 4}));   // max_num_seqs 3
  EXPECT_EQ(verify_graph_batch_sizes(256, 12, 5), std::vector<int>({1, 2, 4, 8, 16}));  // cap 12
  EXPECT_EQ(verify_graph_batch_sizes(256, 1, 2), std::vector<int>({1}));
  EXPECT_EQ(verify_graph_batch_sizes(512, 512, 5).back(), kMaxVerifyGraphBatch);
}

TEST(CudaGraphPolicy, VerifyBucketTakesDraftRowsAndRefusesTheRest) {
  const auto vb = verify_graph_batch_sizes(64, 8, 5);  // 1 2 4 8, q_max 5
  const int width = 5, bs = 16, len = 64;
  EXPECT_EQ(graph_verify_bucket(verify_batch({5}, 3), vb, 5, width, bs, len), 1);
  EXPECT_EQ(graph_verify_bucket(verify_batch({3, 1, 5}, 3), vb, 5, width, bs, len), 4);
  EXPECT_EQ(graph_verify_bucket(verify_batch({1, 1}, 3), vb, 5, width, bs, len), 2);  // plain decode fits too
  EXPECT_EQ(graph_verify_bucket(verify_batch(std::vector<int>(8, 2), 3), vb, 5, width, bs, len), 8);
  EXPECT_EQ(graph_verify_bucket(verify_batch(std::vector<int>(9, 2), 3), vb, 5, width, bs, len), -1);
  EXPECT_EQ(graph_verify_bucket(verify_batch({6}, 3), vb, 5, width, bs, len), -1);  // > q_max rows
  EXPECT_EQ(graph_verify_bucket(verify_batch({2}, 3), {}, 5, width, bs, len), -1);  // no graphs
  EXPECT_EQ(graph_verify_bucket(verify_batch({2}, 3, 32), vb, 5, width, bs, len), -1);
  EXPECT_EQ(graph_verify_bucket(verify_batch({2, 2}, 3), vb, 5, width, bs, 22), -1);  // ctx 23 > 22
  HostBatch partial = verify_batch({3, 2}, 3);  // a prefill chunk that samples only its last row
  partial.logits_indices = {2, 4};
  EXPECT_EQ(graph_verify_bucket(partial, vb, 5, width, bs, len), -1);
  HostBatch extra = verify_batch({3, 2}, 3);  // prompt-logprob rows
  extra.num_extra_rows = 1;
  EXPECT_EQ(graph_verify_bucket(extra, vb, 5, width, bs, len), -1);
  HostBatch empty_seq = verify_batch({3, 2}, 3);  // a sequence without rows
  empty_seq.cu_seqlens_q = {0, 5, 5};
  EXPECT_EQ(graph_verify_bucket(empty_seq, vb, 5, width, bs, len), -1);
  HostBatch short_ctx = verify_batch({3, 2}, 3);  // fewer keys than query rows: malformed
  short_ctx.context_lens[1] = 1;
  EXPECT_EQ(graph_verify_bucket(short_ctx, vb, 5, width, bs, len), -1);
  HostBatch offset = verify_batch({3, 2}, 3);  // cu_seqlens_q not starting at 0
  offset.cu_seqlens_q = {1, 3, 5};
  EXPECT_EQ(graph_verify_bucket(offset, vb, 5, width, bs, len), -1);
  HostBatch swapped = verify_batch({3, 2}, 3);  // every row sampled, but out of order
  std::swap(swapped.logits_indices[0], swapped.logits_indices[1]);
  EXPECT_EQ(graph_verify_bucket(swapped, vb, 5, width, bs, len), -1);
  HostBatch short_ids = verify_batch({3, 2}, 3);  // inconsistent arrays: eager reports them
  short_ids.input_ids.pop_back();
  EXPECT_EQ(graph_verify_bucket(short_ids, vb, 5, width, bs, len), -1);
  HostBatch short_slots = verify_batch({3, 2}, 3);
  short_slots.slot_mapping.pop_back();
  EXPECT_EQ(graph_verify_bucket(short_slots, vb, 5, width, bs, len), -1);
  HostBatch wide = verify_batch({2}, 8);  // wider tables: fine while the extra entries are unused
  EXPECT_EQ(graph_verify_bucket(wide, vb, 5, width, bs, len), 1);
  wide.block_tables[6] = 7;
  EXPECT_EQ(graph_verify_bucket(wide, vb, 5, width, bs, len), -1);
}

TEST(CudaGraphPolicy, FillVerifyStagingPadsSequencesAndRows) {
  const int width = 4, q_max = 3, bucket = 4;
  const auto l = DecodeStagingLayout::make(8, width, 8 * q_max);
  EXPECT_EQ(l.max_tokens, 24);
  std::vector<int32_t> buf(size_t(l.total), 12345);
  const HostBatch hb = verify_batch({3, 1, 2}, 2);  // 6 rows of 12
  fill_verify_staging(l, bucket, q_max, hb, buf.data());
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(buf[l.input_ids + r], hb.input_ids[r]);
    EXPECT_EQ(buf[l.positions + r], hb.positions[r]);
    EXPECT_EQ(buf[l.slot_mapping + r], hb.slot_mapping[r]);
  }
  for (int r = 6; r < bucket * q_max; ++r) {  // padding rows: no KV store
    EXPECT_EQ(buf[l.input_ids + r], 0);
    EXPECT_EQ(buf[l.positions + r], 0);
    EXPECT_EQ(buf[l.slot_mapping + r], -1);
  }
  for (int r = 0; r < bucket * q_max; ++r) EXPECT_EQ(buf[l.logits_indices + r], r);
  const std::vector<int32_t> cu = {0, 3, 4, 6, 6};  // the 4th sequence: empty
  for (int i = 0; i <= bucket; ++i) EXPECT_EQ(buf[l.cu_seqlens_q + i], cu[size_t(i)]);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(buf[l.context_lens + i], hb.context_lens[size_t(i)]);
    EXPECT_EQ(buf[l.block_tables + i * width + 0], 10 * i);
    EXPECT_EQ(buf[l.block_tables + i * width + 1], 10 * i + 1);
    EXPECT_EQ(buf[l.block_tables + i * width + 2], -1);
  }
  EXPECT_EQ(buf[l.context_lens + 3], 0);
  for (int j = 0; j < width; ++j) EXPECT_EQ(buf[l.block_tables + 3 * width + j], -1);
  EXPECT_EQ(buf[l.input_ids + bucket * q_max], 12345);  // past the bucket: untouched
  EXPECT_LE(l.input_ids + 24, l.positions);             // token arrays hold max_tokens
  // Capture: no sequence at all, every row padding.
  HostBatch none;
  fill_verify_staging(l, 2, q_max, none, buf.data());
  for (int i = 0; i <= 2; ++i) EXPECT_EQ(buf[l.cu_seqlens_q + i], 0);
  for (int r = 0; r < 6; ++r) EXPECT_EQ(buf[l.slot_mapping + r], -1);
  // Too many rows or sequences for the bucket, or for the staging buffer: refused.
  EXPECT_THROW(fill_verify_staging(l, 2, q_max, verify_batch({3, 3, 1}, 2), buf.data()), Error);
  EXPECT_THROW(fill_verify_staging(l, 8, 4, verify_batch({1}, 2), buf.data()), Error);
  const HostBatch too_wide = [] {
    HostBatch b = verify_batch({2}, 6);
    b.block_tables[5] = 9;
    return b;
  }();
  EXPECT_THROW(fill_verify_staging(l, 1, q_max, too_wide, buf.data()), Error);
}

}  // namespace
}  // namespace nanovllm
