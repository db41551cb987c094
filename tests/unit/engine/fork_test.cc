// n > 1: completions fork from the first one after its prefill. BlockManager::fork shares the
// parent's full prompt blocks (all but the one holding the last prompt token) through ref
// counts; allocate() then gives the child the rest; the shared blocks are freed only when the
// last holder lets go. Checked with and without prefix caching.
#include <gtest/gtest.h>

#include "engine/block_manager.h"
#include "engine/scheduler.h"
#include "test_helpers.h"
#include "util/check.h"

namespace nanovllm {
namespace {

using test::iota_tokens;
using test::make_seq;
constexpr int kBs = 16;

TEST(Fork, SharesFullPromptBlocksByRefCount) {
  for (bool caching : {false, true}) {
    BlockManager bm(16, kBs, caching);
    auto parent = make_seq(1, iota_tokens(40, 100), kBs);  // blocks: 16 + 16 + 8
    bm.allocate(*parent);
    ASSERT_EQ(parent->block_table.size(), 3u);
    EXPECT_EQ(bm.num_free_blocks(), 13);
    std::vector<std::shared_ptr<Sequence>> kids;
    for (int k = 0; k < 2; ++k) {
      auto child = make_seq(2 + k, iota_tokens(40, 100), kBs);
      bm.fork(*parent, *child);
      ASSERT_EQ(child->block_table.size(), 2u);
      EXPECT_EQ(child->block_table[0], parent->block_table[0]);
      EXPECT_EQ(child->block_table[1], parent->block_table[1]);
      EXPECT_EQ(child->num_cached_tokens, 32);
      EXPECT_TRUE(bm.can_allocate(*child));
      bm.allocate(*child);  // its own last block (the 8 tail tokens are computed again)
      ASSERT_EQ(child->block_table.size(), 3u);
      EXPECT_NE(child->block_table[2], parent->block_table[2]);
      EXPECT_EQ(child->num_cached_tokens, 32) << "caching=" << caching;
      kids.push_back(std::move(child));
    }
    EXPECT_EQ(bm.block(parent->block_table[0]).ref_count, 3);
    EXPECT_EQ(bm.block(parent->block_table[2]).ref_count, 1);
    EXPECT_EQ(bm.num_free_blocks(), 16 - 3 - 2);
    bm.check_invariants();
    bm.deallocate(*parent);  // the children still hold the shared blocks
    EXPECT_EQ(bm.block(kids[0]->block_table[0]).ref_count, 2);
    EXPECT_EQ(bm.num_free_blocks(), 16 - 2 - 2);
    for (auto& k : kids) bm.deallocate(*k);
    EXPECT_EQ(bm.num_free_blocks(), 16);
    bm.check_invariants();
  }
}

TEST(Fork, PromptOfWholeBlocksKeepsTheLastOneOwn) {
  BlockManager bm(8, kBs, false);
  auto parent = make_seq(1, iota_tokens(32, 5), kBs);
  bm.allocate(*parent);
  auto child = make_seq(2, iota_tokens(32, 5), kBs);
  bm.fork(*parent, *child);
  // The second block holds the last prompt token: the child computes it for its own logits.
  EXPECT_EQ(child->block_table.size(), 1u);
  EXPECT_EQ(child->num_cached_tokens, 16);
  auto tiny = make_seq(3, iota_tokens(5, 5), kBs);
  auto tiny_parent = make_seq(4, iota_tokens(5, 5), kBs);
  bm.allocate(*tiny_parent);
  bm.fork(*tiny_parent, *tiny);  // nothing to share
  EXPECT_TRUE(tiny->block_table.empty());
  EXPECT_EQ(tiny->num_cached_tokens, 0);
  auto other = make_seq(5, iota_tokens(7, 5), kBs);
  EXPECT_THROW(bm.fork(*parent, *other), Error);  // prompts of different lengths
}

// Through the scheduler: a forked child waits, is admitted with only its tail to prefill, and
// aborting it while it waits gives its shared references back.
TEST(Fork, SchedulerPrefillsOnlyTheTail) {
  SchedulerConfig sc;
  sc.num_kvcache_blocks = 16;
  sc.block_size = kBs;
  sc.max_model_len = 256;
  sc.max_num_batched_tokens = 256;
  sc.enable_prefix_caching = false;
  test::TestScheduler s(sc);
  SamplingParams p;
  p.max_tokens = 4;
  auto parent_owned = make_seq(1, iota_tokens(40, 100), kBs, p);
  Sequence* parent = parent_owned.get();
  s.add(parent_owned);
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.num_prefill_tokens, 40);
  auto c1 = make_seq(2, iota_tokens(40, 100), kBs, p);
  auto c2 = make_seq(3, iota_tokens(40, 100), kBs, p);
  s.block_manager().fork(*parent, *c1);
  s.block_manager().fork(*parent, *c2);
  s.add(c1);
  s.add(c2);
  (void)s.postprocess(o, {7}, test::token_stops({0}, s));
  Sequence* aborted = s.finish(3, FinishReason::kAbort);  // a waiting fork: its shared blocks go
  ASSERT_TRUE(aborted);
  EXPECT_EQ(s.block_manager().block(parent->block_table[0]).ref_count, 2);
  SchedulerOutput o2 = s.schedule();  // prefill-first: the waiting child's tail alone
  ASSERT_EQ(o2.seqs.size(), 1u);
  EXPECT_EQ(o2.seqs[0].seq->seq_id, 2u);
  EXPECT_EQ(o2.num_prefill_tokens, 8);
  s.block_manager().check_invariants();
}

}  // namespace
}  // namespace nanovllm
