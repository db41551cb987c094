// The continuous-batching walk-through of the seeds (000_c2b39e0c33a9ef4b.txt): 10 sequences,
// max batch size 7. Prompt sizes and the cache size are chosen so that exactly the documented
// queues appear: the cache has 8 blocks of 16 tokens; Seq1-7 need 1 block each (7 fit, the
// batch limit stops admission), Seq8 needs 2 blocks and cannot be allocated until Seq1 and
// Seq4 (max_tokens 5) finish after iteration 5; then Seq8 (2) and Seq9 (1) fit in the 3 free
// blocks but Seq10 does not. No decode step crosses a block boundary, so nothing is preempted.
#include <gtest/gtest.h>

#include "engine/scheduler.h"
#include "test_helpers.h"

namespace nanovllm {
namespace {

std::vector<uint64_t> ids(const std::deque<Sequence*>& q) {
  std::vector<uint64_t> v;
  for (const Sequence* s : q) v.push_back(s->seq_id);
  return v;
}
std::vector<uint64_t> ids(const SchedulerOutput& o) {
  std::vector<uint64_t> v;
  for (const auto& s : o.seqs) v.push_back(s.seq->seq_id);
  return v;
}
using V = std::vector<uint64_t>;

TEST(SchedulerWalkthrough, TenSequencesMaxBatchSeven) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 7;
  cfg.num_kvcache_blocks = 8;
  cfg.block_size = 16;
  test::TestScheduler sched(cfg);
  for (uint64_t id = 1; id <= 10; ++id) {
    SamplingParams p;
    p.max_tokens = (id == 1 || id == 4) ? 5 : 100;
    const int len = id == 8 ? 18 : 2;
    sched.add(test::make_seq(id, test::iota_tokens(len, static_cast<int>(id) * 100), 16, p));
  }
  int next_token = 1000;  // fake model output, never EOS
  auto step = [&](const SchedulerOutput& out) {
    std::vector<int> toks;
    for (const auto& s : out.seqs)
      if (s.sample) toks.push_back(next_token++);
    return sched.postprocess(out, toks, test::token_stops({0}, sched));
  };

  // Iteration 1: prefill Seq1-7 (batch limit).
  SchedulerOutput o = sched.schedule();
  EXPECT_TRUE(o.is_prefill);
  EXPECT_EQ(ids(o), (V{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(o.num_prefill_tokens, 14);
  EXPECT_TRUE(step(o).empty());
  EXPECT_EQ(ids(sched.waiting()), (V{8, 9, 10}));
  EXPECT_EQ(ids(sched.running()), (V{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(sched.block_manager().num_free_blocks(), 1);

  // Iterations 2-5: Seq8 cannot be allocated; decode all 7.
  for (int it = 2; it <= 5; ++it) {
    o = sched.schedule();
    EXPECT_FALSE(o.is_prefill) << "iteration " << it;
    EXPECT_EQ(ids(o), (V{1, 2, 3, 4, 5, 6, 7})) << "iteration " << it;
    EXPECT_EQ(o.num_decode_tokens, 7);
    EXPECT_EQ(o.num_preempted, 0);
    auto fin = step(o);
    if (it < 5) {
      EXPECT_TRUE(fin.empty());
      EXPECT_EQ(ids(sched.running()), (V{1, 2, 3, 4, 5, 6, 7}));
    } else {
      // After iteration 5: Seq1 and Seq4 finish (max_tokens) and free their blocks.
      ASSERT_EQ(fin.size(), 2u);
      EXPECT_EQ(fin[0]->seq_id, 1u);
      EXPECT_EQ(fin[1]->seq_id, 4u);
      EXPECT_EQ(test::name(fin[0]->finish_reason), std::string("length"));
      EXPECT_EQ(fin[0]->num_completion_tokens(), 5);
      EXPECT_EQ(ids(sched.running()), (V{2, 3, 5, 6, 7}));
      EXPECT_EQ(sched.block_manager().num_free_blocks(), 3);
    }
    EXPECT_EQ(ids(sched.waiting()), (V{8, 9, 10})) << "iteration " << it;
  }

  // Iteration 6: prefill Seq8 and Seq9 only; Seq10 does not fit.
  o = sched.schedule();
  EXPECT_TRUE(o.is_prefill);
  EXPECT_EQ(ids(o), (V{8, 9}));
  EXPECT_TRUE(step(o).empty());
  EXPECT_EQ(ids(sched.waiting()), (V{10}));
  EXPECT_EQ(ids(sched.running()), (V{2, 3, 5, 6, 7, 8, 9}));

  // Iteration 7: Seq10 still cannot be added; decode all 7 in one batch.
  o = sched.schedule();
  EXPECT_FALSE(o.is_prefill);
  EXPECT_EQ(ids(o), (V{2, 3, 5, 6, 7, 8, 9}));
  EXPECT_TRUE(step(o).empty());
  EXPECT_EQ(ids(sched.waiting()), (V{10}));
  EXPECT_EQ(ids(sched.running()), (V{2, 3, 5, 6, 7, 8, 9}));
  EXPECT_EQ(sched.running()[0]->num_completion_tokens(), 6);  // Seq2: 6 generated tokens
  EXPECT_EQ(sched.running()[5]->num_completion_tokens(), 2);  // Seq8: prefill + 1 decode
  EXPECT_EQ(sched.num_preemptions(), 0);
  sched.block_manager().check_invariants();
}

}  // namespace
}  // namespace nanovllm
