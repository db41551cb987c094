#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/scheduler.h"
#include "test_helpers.h"
#include "util/check.h"

namespace nanovllm {
namespace {

using test::iota_tokens;
using test::make_seq;
using test::TestScheduler;
using ::testing::HasSubstr;
using V = std::vector<uint64_t>;

std::vector<uint64_t> ids(const std::deque<Sequence*>& q) {
  std::vector<uint64_t> v;
  for (const Sequence* s : q) v.push_back(s->seq_id);
  return v;
}

SchedulerConfig small_config(const std::string& policy, int blocks) {
  SchedulerConfig c;
  c.policy = parse_schedule_policy(policy);
  c.block_size = 16;
  c.num_kvcache_blocks = blocks;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 4096;
  c.max_model_len = 4096;
  return c;
}

// Runs postprocess with `tok` for every sampling sequence.
std::vector<Sequence*> feed(Scheduler& s, const SchedulerOutput& o, int tok) {
  std::vector<int> toks;
  for (const auto& x : o.seqs)
    if (x.sample) toks.push_back(tok);
  return s.postprocess(o, toks, test::token_stops({7}, s));  // EOS id 7
}

TEST(Scheduler, AddRejectsRequestsThatCanNeverRun) {
  SchedulerConfig c = small_config("prefill-first", 4);
  c.max_model_len = 100;
  c.max_num_batched_tokens = 40;
  TestScheduler s(c);
  auto msg = [&](std::shared_ptr<Sequence> seq) -> std::string {
    try {
      s.add(std::move(seq));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(msg(make_seq(1, {}, 16)), HasSubstr("empty"));
  EXPECT_THAT(msg(make_seq(2, iota_tokens(101, 0), 16)),
              HasSubstr("prompt has 101 tokens, more than max_model_len 100"));
  EXPECT_THAT(msg(make_seq(3, iota_tokens(41, 0), 16)), HasSubstr("max_num_batched_tokens 40"));
  EXPECT_TRUE(s.is_finished());
  EXPECT_EQ(msg(make_seq(4, iota_tokens(40, 0), 16)), "");
  EXPECT_THAT(msg(make_seq(4, iota_tokens(3, 0), 16)), HasSubstr("duplicate"));
  EXPECT_EQ(s.num_waiting(), 1u);

  SchedulerConfig m = small_config("mixed", 4);  // 64 cache tokens
  TestScheduler sm(m);
  try {
    sm.add(make_seq(5, iota_tokens(65, 0), 16));
    ADD_FAILURE() << "a prompt larger than the whole cache was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("more than the 4 blocks in the cache"));
  }
  sm.add(make_seq(6, iota_tokens(64, 0), 16));  // mixed: no budget limit on prompt size
  EXPECT_EQ(sm.num_waiting(), 1u);
}

TEST(Scheduler, PrefillFirstBudgetChargesOnlyUncachedTokens) {
  SchedulerConfig c = small_config("prefill-first", 32);
  c.max_num_batched_tokens = 64;
  TestScheduler s(c);
  s.add(make_seq(1, iota_tokens(40, 0), 16));
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.seqs.size(), 1u);
  feed(s, o, 100);
  // 40 + 40 > 64 is checked on the full length, so two more 40-token prompts never share a
  // step; but the charge after a prefix hit (32 cached) is only 8 tokens.
  s.add(make_seq(2, iota_tokens(40, 0), 16));
  s.add(make_seq(3, iota_tokens(20, 500), 16));
  o = s.schedule();
  ASSERT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(o.seqs[0].num_new_tokens, 8);
  EXPECT_EQ(o.seqs[0].seq->num_cached_tokens, 32);
  EXPECT_EQ(o.seqs[1].num_new_tokens, 20);
  EXPECT_EQ(o.num_prefill_tokens, 28);
}

TEST(Scheduler, PrefixCachingCanBeDisabled) {
  for (bool enabled : {true, false}) {
    SchedulerConfig c = small_config("prefill-first", 32);
    c.enable_prefix_caching = enabled;
    TestScheduler s(c);
    s.add(make_seq(1, iota_tokens(40, 0), 16));
    feed(s, s.schedule(), 3);
    s.add(make_seq(2, iota_tokens(40, 0), 16));
    SchedulerOutput o = s.schedule();
    ASSERT_EQ(o.seqs.size(), 1u);
    EXPECT_EQ(o.seqs[0].num_new_tokens, enabled ? 8 : 40);
    EXPECT_EQ(o.seqs[0].seq->num_prefix_hit_tokens, enabled ? 32 : 0);
  }
}

TEST(Scheduler, PreemptsYoungestFirstThenItselfToFrontOfWaiting) {
  TestScheduler s(small_config("prefill-first", 3));
  SamplingParams pa;
  pa.max_tokens = 2;
  s.add(make_seq(1, iota_tokens(16, 0), 16, pa));  // A
  s.add(make_seq(2, iota_tokens(16, 100), 16));    // B
  s.add(make_seq(3, iota_tokens(16, 200), 16));    // C
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.seqs.size(), 3u);
  feed(s, o, 50);  // every sequence now has 17 tokens: the next decode needs a new block
  EXPECT_EQ(s.block_manager().num_free_blocks(), 0);
  o = s.schedule();
  EXPECT_FALSE(o.is_prefill);
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].seq->seq_id, 1u);
  EXPECT_EQ(o.num_preempted, 2);
  EXPECT_EQ(s.num_preemptions(), 2);
  EXPECT_EQ(ids(s.running()), (V{1}));
  EXPECT_EQ(ids(s.waiting()), (V{2, 3}));  // C preempted first, then B itself, both at front
  for (const Sequence* w : s.waiting()) {
    EXPECT_EQ(w->status, SequenceStatus::WAITING);
    EXPECT_TRUE(w->block_table.empty());
    EXPECT_EQ(w->num_cached_tokens, 0);
  }
  auto fin = feed(s, o, 51);  // A reaches max_tokens = 2 and frees its 2 blocks
  ASSERT_EQ(fin.size(), 1u);
  // B is re-prefilled with its generated token; its first block is revived from the cache,
  // so only the 17th token is computed, and that step samples B's next token.
  o = s.schedule();
  EXPECT_TRUE(o.is_prefill);
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].seq->seq_id, 2u);
  EXPECT_EQ(o.seqs[0].num_new_tokens, 1);
  EXPECT_TRUE(o.seqs[0].sample);
  EXPECT_EQ(o.seqs[0].seq->num_prefix_hit_tokens, 16);
  feed(s, o, 52);
  const Sequence* b = s.running()[0];
  EXPECT_EQ(b->num_completion_tokens(), 2);
  EXPECT_EQ(b->completion_token_ids()[0], 50);
  EXPECT_EQ(b->completion_token_ids()[1], 52);
  EXPECT_EQ(b->num_cached_tokens, 17);
  s.block_manager().check_invariants();
}

TEST(Scheduler, FinishingRules) {
  struct Case {
    const char* name;
    SamplingParams p;
    std::vector<int> tokens;  // model output per step
    int expect_steps;         // tokens generated when it finishes
    std::string reason;
  };
  auto P = [](auto f) {
    SamplingParams p;
    p.max_tokens = 10;
    f(p);
    return p;
  };
  std::vector<Case> cases = {
      {"eos", P([](auto&) {}), {5, 7, 5}, 2, "stop"},
      {"ignore_eos", P([](auto& p) { p.ignore_eos = true; }), {7, 7, 7, 7}, 10, "length"},
      {"stop_token", P([](auto& p) { p.stop_token_ids = {9}; }), {5, 9}, 2, "stop"},
      {"stop_token_despite_ignore_eos",
       P([](auto& p) { p.stop_token_ids = {9}; p.ignore_eos = true; }), {7, 9}, 2, "stop"},
      {"min_tokens", P([](auto& p) { p.min_tokens = 3; }), {7, 7, 7}, 3, "stop"},
      {"min_tokens_stop_id", P([](auto& p) { p.min_tokens = 2; p.stop_token_ids = {9}; }),
       {9, 9}, 2, "stop"},
      {"max_tokens", P([](auto& p) { p.max_tokens = 3; }), {1, 2, 3, 4}, 3, "length"},
  };
  for (const auto& tc : cases) {
    TestScheduler s(small_config("prefill-first", 8));
    s.add(make_seq(1, iota_tokens(5, 10), 16, tc.p));
    int steps = 0;
    std::vector<Sequence*> fin;
    while (fin.empty() && steps < 20) {
      SchedulerOutput o = s.schedule();
      const int tok = tc.tokens[std::min<size_t>(static_cast<size_t>(steps), tc.tokens.size() - 1)];
      fin = feed(s, o, tok);
      ++steps;
    }
    ASSERT_EQ(fin.size(), 1u) << tc.name;
    EXPECT_EQ(steps, tc.expect_steps) << tc.name;
    EXPECT_EQ(fin[0]->num_completion_tokens(), tc.expect_steps) << tc.name;
    EXPECT_EQ(test::name(fin[0]->finish_reason), tc.reason) << tc.name;
    EXPECT_EQ(fin[0]->status, SequenceStatus::FINISHED) << tc.name;
    EXPECT_TRUE(fin[0]->block_table.empty()) << tc.name;
    EXPECT_TRUE(s.is_finished()) << tc.name;
    EXPECT_EQ(s.block_manager().num_used_blocks(), 0) << tc.name;
  }
}

TEST(Scheduler, MaxModelLenFinishesWithLength) {
  SchedulerConfig c = small_config("prefill-first", 8);
  c.max_model_len = 20;
  TestScheduler s(c);
  SamplingParams p;
  p.max_tokens = 100;
  s.add(make_seq(1, iota_tokens(18, 10), 16, p));
  std::vector<Sequence*> fin;
  int steps = 0;
  while (fin.empty()) {
    fin = feed(s, s.schedule(), 3);
    ASSERT_LT(++steps, 10);
  }
  EXPECT_EQ(fin[0]->size(), 20);
  EXPECT_EQ(test::name(fin[0]->finish_reason), std::string("length"));
}

TEST(Scheduler, FinishAbortsWaitingAndRunningAndFreesBlocks) {
  TestScheduler s(small_config("prefill-first", 8));
  s.add(make_seq(1, iota_tokens(20, 0), 16));
  SchedulerOutput o = s.schedule();
  feed(s, o, 3);
  s.add(make_seq(2, iota_tokens(20, 100), 16));
  EXPECT_EQ(s.block_manager().num_used_blocks(), 2);
  auto w = s.finish(2, FinishReason::kAbort);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(test::name(w->finish_reason), std::string("abort"));
  EXPECT_EQ(w->status, SequenceStatus::FINISHED);
  EXPECT_EQ(s.num_waiting(), 0u);
  // Abort a running sequence between schedule() and postprocess(): blocks freed at once and
  // postprocess skips it (its token is still consumed).
  s.add(make_seq(3, iota_tokens(4, 300), 16));
  o = s.schedule();  // prefill of 3
  auto r = s.finish(1, FinishReason::kAbort);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->block_table.empty());
  EXPECT_EQ(s.block_manager().num_used_blocks(), 1);
  o = s.schedule();  // decode of 3 only
  ASSERT_EQ(o.seqs.size(), 1u);
  auto r3 = s.finish(3, FinishReason::kAbort);
  EXPECT_TRUE(feed(s, o, 5).empty());
  EXPECT_EQ(r3->num_completion_tokens(), 0);
  EXPECT_EQ(s.finish(42, FinishReason::kAbort), nullptr);
  EXPECT_TRUE(s.is_finished());
  EXPECT_EQ(s.block_manager().num_used_blocks(), 0);
  s.block_manager().check_invariants();
}

TEST(SchedulerMixed, LongPromptIsChunkedAndSamplesOnlyAtTheEnd) {
  SchedulerConfig c = small_config("mixed", 16);
  c.max_num_batched_tokens = 32;
  TestScheduler s(c);
  s.add(make_seq(1, iota_tokens(100, 0), 16));
  const int chunks[4] = {32, 32, 32, 4};
  int cached = 0;
  for (int i = 0; i < 4; ++i) {
    SchedulerOutput o = s.schedule();
    ASSERT_EQ(o.seqs.size(), 1u);
    EXPECT_TRUE(o.is_prefill);
    EXPECT_EQ(o.seqs[0].seq->num_cached_tokens, cached);
    EXPECT_EQ(o.seqs[0].num_new_tokens, chunks[i]);
    EXPECT_EQ(o.seqs[0].sample, i == 3);
    EXPECT_EQ(o.num_prefill_tokens, chunks[i]);
    feed(s, o, 5);
    cached += chunks[i];
    EXPECT_EQ(s.running()[0]->num_completion_tokens(), i == 3 ? 1 : 0);
  }
  EXPECT_EQ(s.running()[0]->num_cached_tokens, 100);
  SchedulerOutput o = s.schedule();  // now a decode step
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_FALSE(o.is_prefill);
  EXPECT_EQ(o.num_decode_tokens, 1);
  EXPECT_EQ(o.seqs[0].num_new_tokens, 1);
  EXPECT_TRUE(o.seqs[0].sample);
}

TEST(SchedulerMixed, DecodeFirstThenChunksWithinBudget) {
  SchedulerConfig c = small_config("mixed", 32);
  c.max_num_batched_tokens = 32;
  TestScheduler s(c);
  s.add(make_seq(1, iota_tokens(10, 0), 16));
  s.add(make_seq(2, iota_tokens(10, 100), 16));
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(o.num_prefill_tokens, 20);
  feed(s, o, 5);
  s.add(make_seq(3, iota_tokens(100, 1000), 16));
  std::vector<int> chunks;
  for (int step = 0; step < 4; ++step) {
    o = s.schedule();
    int total = 0;
    for (const auto& x : o.seqs) total += x.num_new_tokens;
    EXPECT_LE(total, 32);
    ASSERT_GE(o.seqs.size(), 2u);
    EXPECT_EQ(o.seqs[0].seq->seq_id, 1u);  // decodes come first
    EXPECT_EQ(o.seqs[1].seq->seq_id, 2u);
    EXPECT_EQ(o.num_decode_tokens, 2);
    if (o.seqs.size() == 3) {
      const ScheduledSeq& x = o.seqs[2];
      EXPECT_EQ(x.seq->seq_id, 3u);
      chunks.push_back(x.num_new_tokens);
      EXPECT_EQ(x.sample, x.seq->num_cached_tokens + x.num_new_tokens == 100);
      EXPECT_TRUE(o.is_prefill);
    } else {
      EXPECT_FALSE(o.is_prefill);
    }
    feed(s, o, 5);
  }
  EXPECT_EQ(chunks, (std::vector<int>{30, 30, 30, 10}));
  o = s.schedule();  // seq 3 has sampled: three decodes, no prefill
  EXPECT_EQ(o.num_decode_tokens, 3);
  EXPECT_FALSE(o.is_prefill);
  s.block_manager().check_invariants();
}

TEST(SchedulerMixed, ChunkedPrefillPublishesOnlyComputedBlocks) {
  SchedulerConfig c = small_config("mixed", 32);
  c.max_num_batched_tokens = 24;
  TestScheduler s(c);
  s.add(make_seq(1, iota_tokens(80, 0), 16));
  SchedulerOutput o = s.schedule();  // tokens [0, 24): block 0 full, block 1 partly
  feed(s, o, 5);
  const Sequence* a = s.running()[0];
  EXPECT_TRUE(s.block_manager().block(a->block_table[0]).has_hash);
  EXPECT_FALSE(s.block_manager().block(a->block_table[1]).has_hash);
  // A second request with the same 80-token prompt may only reuse what is computed.
  s.add(make_seq(2, iota_tokens(80, 0), 16));
  o = s.schedule();  // seq 1 gets the whole budget
  ASSERT_EQ(o.seqs.size(), 1u);
  feed(s, o, 5);     // seq 1 computed [0, 48)
  o = s.schedule();  // seq 1 [48, 72), nothing left for seq 2
  feed(s, o, 5);
  o = s.schedule();  // seq 1 [72, 80) samples; seq 2 admitted with hits on blocks 0-3
  ASSERT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(o.seqs[0].num_new_tokens, 8);
  EXPECT_TRUE(o.seqs[0].sample);
  const Sequence* b = o.seqs[1].seq;
  EXPECT_EQ(b->seq_id, 2u);
  EXPECT_EQ(b->num_prefix_hit_tokens, 64);  // blocks 0-3 computed; block 4 is the last one
  EXPECT_EQ(o.seqs[1].num_new_tokens, 16);
  EXPECT_TRUE(o.seqs[1].sample);
  feed(s, o, 5);
  s.block_manager().check_invariants();
}

TEST(SchedulerMixed, PreemptsFromTailWhenDecodeNeedsABlock) {
  TestScheduler s(small_config("mixed", 3));
  for (uint64_t id = 1; id <= 3; ++id) s.add(make_seq(id, iota_tokens(16, 100 * id), 16));
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.seqs.size(), 3u);
  feed(s, o, 5);  // all at 17 tokens, cache full
  o = s.schedule();
  EXPECT_EQ(o.num_preempted, 2);
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].seq->seq_id, 1u);
  EXPECT_EQ(ids(s.waiting()), (V{2, 3}));
  EXPECT_EQ(ids(s.running()), (V{1}));
  feed(s, o, 5);
  s.block_manager().check_invariants();
}

// Random workload through both policies: every request finishes with the right number of
// tokens, the token budget and batch limits hold, the block manager stays consistent.
TEST(Scheduler, RandomWorkloadDrainsUnderBothPolicies) {
  for (const char* policy : {"prefill-first", "mixed"}) {
    SchedulerConfig c = small_config(policy, 12);
    c.max_num_batched_tokens = 128;
    c.max_num_seqs = 6;
    c.max_model_len = 128;
    TestScheduler s(c);
    std::mt19937 rng(7);
    std::map<uint64_t, int> expect_len;
    for (uint64_t id = 1; id <= 40; ++id) {
      SamplingParams p;
      p.max_tokens = 1 + static_cast<int>(rng() % 40);
      p.ignore_eos = true;
      const int len = 1 + static_cast<int>(rng() % 80);
      std::vector<int> prompt = iota_tokens(len, 0);  // shared prefixes
      prompt.back() = static_cast<int>(id);
      s.add(make_seq(id, prompt, 16, p));
      expect_len[id] = std::min(len + p.max_tokens, 128);
    }
    int steps = 0;
    size_t done = 0;
    while (!s.is_finished()) {
      SchedulerOutput o = s.schedule();
      ASSERT_FALSE(o.empty()) << policy;
      ASSERT_LE(static_cast<int>(o.seqs.size()), c.max_num_seqs);
      int total = 0;
      for (const auto& x : o.seqs) total += x.num_new_tokens;
      ASSERT_LE(total, c.max_num_batched_tokens) << policy;
      for (auto& f : feed(s, o, static_cast<int>(rng() % 50))) {
        EXPECT_EQ(f->size(), expect_len[f->seq_id]) << policy << " seq " << f->seq_id;
        ++done;
      }
      ASSERT_NO_THROW(s.block_manager().check_invariants());
      ASSERT_LT(++steps, 5000) << policy;
    }
    EXPECT_EQ(done, 40u) << policy;
    EXPECT_EQ(s.block_manager().num_used_blocks(), 0) << policy;
    EXPECT_GT(s.num_preemptions(), 0) << policy << ": the cache is meant to be too small";
  }
}

}  // namespace
}  // namespace nanovllm
