#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "engine/block_manager.h"
#include "test_helpers.h"
#include "util/check.h"

namespace nanovllm {
namespace {

using test::iota_tokens;
using test::make_seq;
constexpr int kBs = 16;

TEST(Sequence, BlockGeometry) {
  auto s = make_seq(1, iota_tokens(33, 100), kBs);
  EXPECT_EQ(s->size(), 33);
  EXPECT_EQ(s->num_blocks(), 3);
  EXPECT_EQ(s->last_block_num_tokens(), 1);
  EXPECT_EQ(s->block(1).size(), 16u);
  EXPECT_EQ(s->block(1)[0], 116);
  EXPECT_EQ(s->block(2).size(), 1u);
  EXPECT_THROW(s->block(3), Error);
  s->append_token(7);
  EXPECT_EQ(s->last_token, 7);
  EXPECT_EQ(s->num_completion_tokens(), 1);
  ASSERT_EQ(s->completion_token_ids().size(), 1u);
  EXPECT_EQ(s->completion_token_ids()[0], 7);
  s->num_cached_tokens = 32;
  EXPECT_EQ(s->num_cached_blocks(), 2);
}

TEST(BlockManager, HashIsXxh64OfLittleEndianInt64sWithPrefix) {
  std::vector<int> toks = {1, -2, 300000};
  // Build the byte string by hand: 8-byte LE prefix, then each id as 8-byte LE two's complement.
  auto le64 = [](std::vector<unsigned char>& b, uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
  };
  std::vector<unsigned char> bytes;
  for (int t : toks) le64(bytes, static_cast<uint64_t>(static_cast<int64_t>(t)));
  EXPECT_EQ(BlockManager::compute_hash(toks, std::nullopt), XXH64(bytes.data(), bytes.size(), 0));
  std::vector<unsigned char> with_prefix;
  le64(with_prefix, 0xfedcba9876543210ull);
  with_prefix.insert(with_prefix.end(), bytes.begin(), bytes.end());
  EXPECT_EQ(BlockManager::compute_hash(toks, 0xfedcba9876543210ull),
            XXH64(with_prefix.data(), with_prefix.size(), 0));
}

TEST(BlockManager, PrefixHitSharesBlocks) {
  BlockManager bm(16, kBs);
  auto a = make_seq(1, iota_tokens(50, 0), kBs);  // 3 full blocks + 2 tokens
  bm.allocate(*a);
  EXPECT_EQ(a->num_cached_tokens, 0);
  EXPECT_EQ(a->block_table.size(), 4u);
  EXPECT_EQ(bm.num_used_blocks(), 4);
  std::vector<int> tb = iota_tokens(40, 0);  // shares blocks 0 and 1, then diverges
  tb.push_back(999);
  tb.push_back(998);
  auto b = make_seq(2, tb, kBs);
  bm.allocate(*b);
  EXPECT_EQ(b->num_cached_tokens, 32);
  EXPECT_EQ(b->num_prefix_hit_tokens, 32);
  EXPECT_EQ(b->block_table[0], a->block_table[0]);
  EXPECT_EQ(b->block_table[1], a->block_table[1]);
  EXPECT_NE(b->block_table[2], a->block_table[2]);
  EXPECT_EQ(bm.block(a->block_table[0]).ref_count, 2);
  EXPECT_EQ(bm.block(a->block_table[2]).ref_count, 1);
  EXPECT_EQ(bm.num_used_blocks(), 4 + 1);
  bm.check_invariants();
  bm.deallocate(*a);
  EXPECT_EQ(bm.block(b->block_table[0]).ref_count, 1);
  EXPECT_EQ(a->num_cached_tokens, 0);
  EXPECT_TRUE(a->block_table.empty());
  bm.deallocate(*b);
  EXPECT_EQ(bm.num_used_blocks(), 0);
  bm.check_invariants();
}

TEST(BlockManager, MissChainsThroughLaterBlocks) {
  BlockManager bm(16, kBs);
  auto a = make_seq(1, iota_tokens(40, 0), kBs);
  bm.allocate(*a);
  std::vector<int> t = iota_tokens(40, 0);
  t[3] = -5;  // first block differs; second block has equal ids but a different prefix
  auto b = make_seq(2, t, kBs);
  bm.allocate(*b);
  EXPECT_EQ(b->num_cached_tokens, 0);
  for (int i = 0; i < 3; ++i) EXPECT_NE(b->block_table[i], a->block_table[i]);
  bm.check_invariants();
}

TEST(BlockManager, LastBlockIsNeverLookedUpButFullLastBlockIsRegistered) {
  BlockManager bm(16, kBs);
  auto a = make_seq(1, iota_tokens(32, 0), kBs);  // exactly two full blocks
  bm.allocate(*a);
  EXPECT_TRUE(bm.block(a->block_table[1]).has_hash);
  auto b = make_seq(2, iota_tokens(32, 0), kBs);  // identical prompt
  bm.allocate(*b);
  EXPECT_EQ(b->num_cached_tokens, 16);  // only the first block; the last one is computed
  EXPECT_EQ(b->block_table[0], a->block_table[0]);
  EXPECT_NE(b->block_table[1], a->block_table[1]);
  // A longer prompt with the same first 32 tokens may hit both.
  auto c = make_seq(3, iota_tokens(33, 0), kBs);
  bm.allocate(*c);
  EXPECT_EQ(c->num_cached_tokens, 32);
  bm.check_invariants();
}

TEST(BlockManager, HashCollisionWithDifferentTokensIsAMiss) {
  BlockManager bm(16, kBs);
  auto a = make_seq(1, iota_tokens(33, 0), kBs);
  bm.allocate(*a);
  std::vector<int> other = iota_tokens(33, 1000);
  const uint64_t h_other = BlockManager::compute_hash(std::span<const int>(other.data(), 16),
                                                      std::nullopt);
  // Block 0 of `a` now claims the hash of `other`'s first block: a simulated collision.
  bm.debug_force_hash(a->block_table[0], h_other);
  ASSERT_EQ(bm.hash_to_block_id().at(h_other), a->block_table[0]);
  bm.check_invariants();
  auto b = make_seq(2, other, kBs);
  bm.allocate(*b);
  EXPECT_EQ(b->num_cached_tokens, 0);
  EXPECT_NE(b->block_table[0], a->block_table[0]);
  EXPECT_EQ(bm.block(a->block_table[0]).ref_count, 1);
  bm.check_invariants();
}

TEST(BlockManager, FreedBlocksAreRevivedUntilReused) {
  BlockManager bm(4, kBs);
  auto a = make_seq(1, iota_tokens(33, 0), kBs);  // 3 blocks
  bm.allocate(*a);
  const std::vector<int> a_blocks = a->block_table;
  bm.deallocate(*a);
  EXPECT_EQ(bm.num_free_blocks(), 4);
  EXPECT_TRUE(bm.block(a_blocks[0]).has_hash);  // content kept while free
  auto b = make_seq(2, iota_tokens(33, 0), kBs);
  bm.allocate(*b);
  EXPECT_EQ(b->num_cached_tokens, 32);
  EXPECT_EQ(b->block_table[0], a_blocks[0]);
  EXPECT_EQ(b->block_table[1], a_blocks[1]);
  EXPECT_EQ(bm.block(a_blocks[0]).ref_count, 1);
  EXPECT_EQ(bm.num_free_blocks(), 1);
  bm.check_invariants();
  bm.deallocate(*b);
  // Overwrite the cached blocks with other content (4 blocks: every block is handed out).
  auto c = make_seq(3, iota_tokens(64, 500), kBs);
  bm.allocate(*c);
  bm.deallocate(*c);
  auto d = make_seq(4, iota_tokens(33, 0), kBs);
  bm.allocate(*d);
  EXPECT_EQ(d->num_cached_tokens, 0);
  bm.check_invariants();
}

TEST(BlockManager, PrefixCachingDisabledNeverHits) {
  BlockManager bm(8, kBs, /*enable_prefix_caching=*/false);
  auto a = make_seq(1, iota_tokens(40, 0), kBs);
  auto b = make_seq(2, iota_tokens(40, 0), kBs);
  bm.allocate(*a);
  bm.allocate(*b);
  EXPECT_EQ(b->num_cached_tokens, 0);
  EXPECT_EQ(bm.num_used_blocks(), 6);
  bm.check_invariants();
}

TEST(BlockManager, AppendAtBlockBoundaries) {
  BlockManager bm(2, kBs);
  auto s = make_seq(1, iota_tokens(16, 0), kBs);
  auto other = make_seq(2, iota_tokens(3, 900), kBs);
  bm.allocate(*s);
  bm.allocate(*other);  // takes the last free block
  s->append_token(50);  // len 17: 17 % 16 == 1, needs a new block
  EXPECT_FALSE(bm.can_append(*s));
  bm.deallocate(*other);
  EXPECT_TRUE(bm.can_append(*s));
  bm.may_append(*s);
  EXPECT_EQ(s->block_table.size(), 2u);
  EXPECT_EQ(bm.num_free_blocks(), 0);
  EXPECT_FALSE(bm.block(s->block_table[1]).has_hash);
  for (int t = 18; t <= 31; ++t) {  // len % 16 in 2..15: nothing to do, even with 0 free
    s->append_token(t);
    EXPECT_TRUE(bm.can_append(*s));
    bm.may_append(*s);
    EXPECT_EQ(s->block_table.size(), 2u);
    EXPECT_FALSE(bm.block(s->block_table[1]).has_hash);
  }
  s->append_token(32);  // len 32: the last block is full and gets registered
  EXPECT_TRUE(bm.can_append(*s));
  bm.may_append(*s);
  const Block& last = bm.block(s->block_table[1]);
  ASSERT_TRUE(last.has_hash);
  const uint64_t prev = bm.block(s->block_table[0]).hash;
  EXPECT_EQ(last.hash, BlockManager::compute_hash(s->block(1), prev));
  EXPECT_EQ(bm.hash_to_block_id().at(last.hash), s->block_table[1]);
  bm.check_invariants();
}

TEST(BlockManager, DoubleFreeIsAnError) {
  BlockManager bm(4, kBs);
  auto a = make_seq(1, iota_tokens(20, 0), kBs);
  bm.allocate(*a);
  Sequence copy = *a;  // same block table
  bm.deallocate(*a);
  EXPECT_THROW(bm.deallocate(copy), Error);
}

// >= 100k random allocate / deallocate / append operations on sequences that share
// prefixes; the bookkeeping must stay consistent after every single one.
TEST(BlockManager, RandomOperationsKeepInvariants) {
  std::mt19937 rng(12345);
  BlockManager bm(48, kBs);
  std::vector<std::vector<int>> templates(4);
  for (auto& t : templates)
    for (int i = 0; i < 120; ++i) t.push_back(static_cast<int>(rng() % 4));  // small vocab
  std::vector<std::shared_ptr<Sequence>> live;
  uint64_t next_id = 1;
  int allocations = 0, hits = 0;
  for (int op = 0; op < 100000; ++op) {
    const unsigned kind = rng() % 10;
    if (kind < 3 || live.empty()) {
      const auto& t = templates[rng() % templates.size()];
      std::vector<int> prompt(t.begin(), t.begin() + 1 + rng() % 80);
      for (unsigned k = rng() % 20; k > 0; --k) prompt.push_back(static_cast<int>(rng() % 3));
      auto s = make_seq(next_id++, prompt, kBs);
      if (bm.can_allocate(*s)) {
        bm.allocate(*s);
        ++allocations;
        hits += s->num_cached_tokens > 0;
        ASSERT_LT(s->num_cached_tokens, s->size());
        live.push_back(std::move(s));
      }
    } else if (kind < 5) {
      const size_t i = rng() % live.size();
      bm.deallocate(*live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      Sequence& s = *live[rng() % live.size()];
      s.append_token(static_cast<int>(rng() % 3));
      if (bm.can_append(s)) {
        bm.may_append(s);
      } else {  // what preemption does
        bm.deallocate(s);
        live.erase(std::find_if(live.begin(), live.end(),
                                [&](const auto& p) { return p.get() == &s; }));
      }
    }
    ASSERT_NO_THROW(bm.check_invariants()) << "after op " << op;
    // Cross-check against the sequences: ref counts and shared content.
    size_t refs = 0;
    for (const auto& s : live) {
      ASSERT_EQ(static_cast<int>(s->block_table.size()), s->num_blocks());
      refs += s->block_table.size();
      for (int b = 0; b < s->num_blocks(); ++b) {
        const Block& blk = bm.block(s->block_table[static_cast<size_t>(b)]);
        if (!blk.has_hash) continue;
        auto content = s->block(b);
        ASSERT_TRUE(std::equal(content.begin(), content.end(), blk.token_ids.begin(),
                               blk.token_ids.end()))
            << "block content mismatch after op " << op;
      }
    }
    int total_ref = 0;
    for (int b = 0; b < bm.num_blocks(); ++b) total_ref += bm.block(b).ref_count;
    ASSERT_EQ(static_cast<size_t>(total_ref), refs);
  }
  EXPECT_GT(allocations, 1000);
  EXPECT_GT(hits, 100);  // the workload really exercises prefix sharing
}

}  // namespace
}  // namespace nanovllm
