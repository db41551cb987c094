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

}  // namespace
}  // namespace nanovllm
