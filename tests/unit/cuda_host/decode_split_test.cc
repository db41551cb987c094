// The v2 decode attention launch policy (kernels/cuda/decode_split.h): head grouping and the
// split-K rule, checked on the CPU.
#include "kernels/cuda/decode_split.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace nanovllm {
namespace {

TEST(DecodeV2Heads, GroupsCoverEveryHeadWithinTheBound) {
  for (int G = 1; G <= 300; ++G) {
    const DecodeV2Heads h = decode_v2_heads(G);
    SCOPED_TRACE(G);
    EXPECT_EQ(h.groups, (G + 7) / 8);
    EXPECT_GE(h.per_block * h.groups, G);        // every head has a block
    EXPECT_LT((h.groups - 1) * h.per_block, G);  // the last block has >= 1 head
    EXPECT_LE(h.per_block, kDecodeV2MaxHeads);
    EXPECT_TRUE(h.bound == 1 || h.bound == 2 || h.bound == 4 || h.bound == 8);
    EXPECT_GE(h.bound, h.per_block);
    EXPECT_LT(h.bound, 2 * h.per_block);  // the smallest instantiation that holds the heads
  }
  EXPECT_EQ(decode_v2_heads(2).bound, 2);  // Qwen3-0.6B: 16 q heads / 8 KV heads
  EXPECT_EQ(decode_v2_heads(3).bound, 4);
  EXPECT_EQ(decode_v2_heads(8).groups, 1);
  const DecodeV2Heads h9 = decode_v2_heads(9);  // balanced 5 + 4, not 8 + 1
  EXPECT_EQ(h9.groups, 2);
  EXPECT_EQ(h9.per_block, 5);
  EXPECT_EQ(h9.bound, 8);
  const DecodeV2Heads h16 = decode_v2_heads(16);
  EXPECT_EQ(h16.groups, 2);
  EXPECT_EQ(h16.per_block, 8);
  EXPECT_EQ(decode_v2_heads(0).groups, 1);  // degenerate input still gives a valid launch
}

// Partitions cover [0, max_seqlen_k) without an empty trailing one, are >= 256 keys (unless the
// whole context is shorter) and a multiple of 64.
void expect_valid(const DecodeSplit& sp, int maxk) {
  const int64_t k = maxk > 0 ? maxk : 1;
  EXPECT_GE(sp.splits, 1);
  EXPECT_EQ(sp.part_len % kDecodePartAlign, 0);
  EXPECT_GE(int64_t(sp.splits) * sp.part_len, k);
  EXPECT_LT(int64_t(sp.splits - 1) * sp.part_len, k);
  if (sp.splits > 1) {
    EXPECT_GE(sp.part_len, kDecodeMinPart);
  }
}

TEST(DecodeSplit, QwenShapeOnAnH100) {
  // Qwen3-0.6B: Hkv = 8, one head group; 132 SMs x 3 resident blocks.
  const int64_t resident = 132 * 3;
  auto split = [&](int B, int L) { return choose_decode_split(L, int64_t(B) * 8, resident); };
  EXPECT_EQ(split(256, 1024).splits, 1);  // 2048 blocks: already > one wave
  EXPECT_EQ(split(115, 1024).splits, 1);
  EXPECT_EQ(split(64, 1024).splits, 1);   // 512 blocks
  EXPECT_EQ(split(33, 1024).splits, 1);   // 264 blocks; 2 splits would overflow the wave
  EXPECT_EQ(split(16, 1024).splits, 3);   // 128 blocks -> 384
  EXPECT_EQ(split(8, 1024).splits, 4);    // capped by partitions of >= 256 keys
  EXPECT_EQ(split(8, 1024).part_len, 256);
  EXPECT_EQ(split(1, 1024).splits, 4);
  // Graph capture at max_model_len: 396 / 8 = 49 wanted, 836-key partitions rounded up to 896.
  EXPECT_EQ(split(1, 40960).splits, 46);
  EXPECT_EQ(split(1, 40960).part_len, 896);
  EXPECT_EQ(split(1, 200).splits, 1);     // shorter than two partitions
  for (int B : {1, 8, 33, 64, 115, 256})
    for (int L : {1, 255, 256, 257, 1024, 4096, 40960}) {
      SCOPED_TRACE(testing::Message() << "B " << B << " L " << L);
      const DecodeSplit sp = split(B, L);
      expect_valid(sp, L);
      // One wave at most: splitting never pushes B * Hkv * splits past the resident blocks.
      if (sp.splits > 1) {
        EXPECT_LE(int64_t(B) * 8 * sp.splits, resident);
      }
    }
}

TEST(DecodeSplit, FillsTheResidentBlocksUpToTheKeyLimit) {
  for (int64_t base : {1, 3, 7, 8, 50, 100, 263, 264, 500, 527, 528, 529, 5000})
    for (int64_t resident : {1, 108, 264, 528, 924})
      for (int maxk : {-5, 0, 1, 63, 64, 255, 256, 511, 512, 1000, 1024, 5000, 40960, 1 << 30}) {
        SCOPED_TRACE(testing::Message() << "base " << base << " resident " << resident << " maxk "
                                        << maxk);
        const DecodeSplit sp = choose_decode_split(maxk, base, resident);
        expect_valid(sp, maxk);
        const int64_t k = maxk > 0 ? maxk : 1;
        const int64_t want =
            std::max<int64_t>(1, std::min(resident / base, std::max<int64_t>(1, k / 256)));
        // Rounding the partition up to 64 keys may merge the last partitions, never add one.
        EXPECT_LE(sp.splits, want);
        EXPECT_GE(sp.splits, want - want / 4 - 1);
        if (base >= resident) {
          EXPECT_EQ(sp.splits, 1);
        }
      }
}

TEST(DecodeSplit, IsAPureFunction) {
  // A graph captured with these inputs must see the same partition count at every replay.
  const DecodeSplit a = choose_decode_split(40960, 64, 528);
  const DecodeSplit b = choose_decode_split(40960, 64, 528);
  EXPECT_EQ(a.splits, b.splits);
  EXPECT_EQ(a.part_len, b.part_len);
}

}  // namespace
}  // namespace nanovllm
