// Speculative decoding on the host side, device-free: the n-gram proposer, the adaptive-K
// controller, and the scheduler + block manager verifying drafts against a "model" that is a
// deterministic function of the prefix (so the right output is known), with random drafts,
// preemption and prefix sharing. After every step: the block manager's invariants, every
// registered block's content equals its sequences' accepted tokens (a rejected draft never
// reaches the prefix cache), KV accounting (num_cached_tokens = size - 1 while decoding, no block
// beyond what size() needs), and at the end every sequence equals the non-speculative run.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "engine/block_manager.h"
#include "spec/ngram_proposer.h"
#include "spec/spec_decoder.h"
#include "test_helpers.h"

namespace nanovllm {
namespace {

using test::make_seq;
using test::TestScheduler;

std::vector<int> drafts(const std::vector<int>& tokens, int k, int nmin = 1, int nmax = 4) {
  NgramProposer p(nmin, nmax);
  std::vector<int> out;
  p.propose_one(tokens, k, out);
  return out;
}

TEST(NgramProposer, LongestMostRecentMatchAndPeriodicContinuation) {
  // The 3-gram 1 2 3 occurred at 0; 9 1 2 3 followed it, then the draft repeats itself.
  EXPECT_EQ(drafts({1, 2, 3, 9, 1, 2, 3}, 5), (std::vector<int>{9, 1, 2, 3, 9}));
  // The most recent occurrence of "1 2" wins (8 followed it, not 7).
  EXPECT_EQ(drafts({1, 2, 7, 1, 2, 8, 1, 2}, 2), (std::vector<int>{8, 1}));
  // A longer n-gram beats a more recent shorter one: "4 1 2" occurred before 7.
  EXPECT_EQ(drafts({4, 1, 2, 7, 5, 1, 2, 8, 4, 1, 2}, 1), (std::vector<int>{7}));
  // A constant loop drafts itself.
  EXPECT_EQ(drafts({6, 5, 5, 5}, 4), (std::vector<int>{5, 5, 5, 5}));
  // No match, ngram_min above the repeats, too short, k = 0: nothing.
  EXPECT_TRUE(drafts({1, 2, 3, 4}, 3).empty());
  EXPECT_TRUE(drafts({1, 2, 9, 1, 2}, 3, /*nmin=*/3).empty());
  EXPECT_TRUE(drafts({7}, 3).empty());
  EXPECT_TRUE(drafts({5, 5, 5}, 0).empty());
}

TEST(SpecDecoder, AdaptiveKFollowsAcceptance) {
  SpecOptions o;
  o.num_speculative_tokens = 6;
  SpecDecoder d(o, std::make_unique<NgramProposer>(1, 4));
  auto s = make_seq(1, {1, 2, 3}, 16);
  const int k0 = d.choose_k(*s);
  EXPECT_GE(k0, 1) << "the prior speculates";
  EXPECT_LT(k0, 6);
  for (int i = 0; i < 20; ++i) {  // every draft accepted
    s->num_spec_accepted = 6;
    d.observe(*s, 6);
  }
  EXPECT_EQ(d.choose_k(*s), 6);
  for (int i = 0; i < 60; ++i) {  // every draft rejected
    s->num_spec_accepted = 0;
    d.observe(*s, d.choose_k(*s) > 0 ? d.choose_k(*s) : 1);
  }
  EXPECT_EQ(d.choose_k(*s), 0) << "a sequence whose drafts fail stops speculating";
  // Idle steps decay the history back toward the prior: it probes again, but not at once.
  d.observe_step(1, 0, false, 0.001);  // two plain steps' times: drafts may follow
  d.observe_step(1, 0, false, 0.001);
  std::deque<Sequence*> running{s.get()};
  s->prefilled = true;
  int idle = 0;
  while (d.choose_k(*s) == 0 && idle < 1000) {
    d.propose(running);
    EXPECT_TRUE(s->spec_token_ids.empty());
    ++idle;
  }
  EXPECT_GE(idle, 4);
  EXPECT_LT(idle, 1000);
  // Above max_batch decoding sequences nobody speculates.
  o.max_batch = 1;
  SpecDecoder small(o, std::make_unique<NgramProposer>(1, 4));
  auto a = make_seq(2, {5, 5, 5, 5}, 16), b = make_seq(3, {5, 5, 5, 5}, 16);
  a->prefilled = b->prefilled = true;
  small.propose({a.get()});
  EXPECT_TRUE(a->spec_token_ids.empty()) << "the first decode step runs plain (timed)";
  small.observe_step(1, 0, false, 0.001);
  small.propose({a.get()});
  EXPECT_TRUE(a->spec_token_ids.empty()) << "so does the second";
  small.observe_step(1, 0, false, 0.001);
  small.propose({a.get()});
  EXPECT_FALSE(a->spec_token_ids.empty());
  small.propose({a.get(), b.get()});
  EXPECT_TRUE(a->spec_token_ids.empty() && b->spec_token_ids.empty());
}

// beta is measured: decode steps with drafts against the plain steps' time.
TEST(SpecDecoder, BetaIsMeasuredFromStepTimes) {
  SpecOptions o;
  SpecDecoder d(o, std::make_unique<NgramProposer>(1, 4));
  EXPECT_DOUBLE_EQ(d.beta(), o.beta);
  d.observe_step(2, 8, false, 0.002);  // no plain time yet: no sample
  EXPECT_DOUBLE_EQ(d.beta(), o.beta);
  d.observe_step(2, 0, false, 0.001);  // plain: 1 ms for 2 sequences
  d.observe_step(2, 0, true, 0.050);   // a prefill step: ignored
  for (int i = 0; i < 60; ++i) d.observe_step(2, 8, false, 0.002);  // 4 drafts each: +100 %
  EXPECT_NEAR(d.beta(), 0.25, 1e-3);
  // A dear draft makes speculation pay only at high acceptance.
  auto s = make_seq(1, {1, 2, 3}, 16);
  for (int i = 0; i < 60; ++i) d.observe_step(1, 1, false, 0.003);  // one draft: +200 %
  EXPECT_GT(d.beta(), 1.5);
  s->spec_accepted = 3.5;  // 70 % acceptance
  s->spec_trials = 5;
  EXPECT_EQ(d.choose_k(*s), 0);
}

// The "model": the next token after a prefix, from its last two tokens (vocabulary 5, so text
// repeats and n-gram drafts are often right, often not).
int model_next(std::span<const int> prefix) {
  const size_t n = prefix.size();
  const int a = prefix[n - 1], b = n > 1 ? prefix[n - 2] : 0;
  return (a * 3 + b * 7 + int(n % 3 == 0)) % 5;
}

struct SimResult {
  std::map<uint64_t, std::vector<int>> tokens;
  int64_t drafted = 0, accepted = 0, preemptions = 0;
};

// Runs `prompts` to completion (max_tokens each) through a Scheduler. speculate: drafts before
// every schedule(), from the n-gram proposer or (mix) replaced by random tokens.
SimResult simulate(const std::vector<std::vector<int>>& prompts, int max_tokens, SchedulePolicy policy,
                   int num_blocks, bool speculate, uint32_t seed) {
  constexpr int kBs = 4;
  SchedulerConfig sc;
  sc.block_size = kBs;
  sc.num_kvcache_blocks = num_blocks;
  sc.max_model_len = 512;
  sc.max_num_batched_tokens = policy == SchedulePolicy::kMixed ? 13 : 512;
  sc.policy = policy;
  TestScheduler sched(sc);
  SamplingParams sp;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  std::vector<std::shared_ptr<Sequence>> seqs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    seqs.push_back(make_seq(i, prompts[i], kBs, sp));
    sched.add(seqs.back());
  }
  std::mt19937 rng(seed);
  NgramProposer ngram(1, 3);
  SimResult r;
  auto stop = test::token_stops({}, sched);
  for (int step = 0; !sched.is_finished(); ++step) {
    EXPECT_LT(step, 100000) << "no progress";
    if (step >= 100000) break;
    if (speculate) {
      for (Sequence* s : sched.running()) {
        s->spec_token_ids.clear();
        if (!s->prefilled) continue;
        const int k = 1 + int(rng() % 6);
        ngram.propose_one(s->token_ids, k, s->spec_token_ids);
        for (int& t : s->spec_token_ids)
          if (rng() % 4 == 0) t = int(rng() % 5);  // some wrong drafts
      }
    }
    const SchedulerOutput out = sched.schedule();
    r.preemptions += out.num_preempted;
    // Each sampled row's token: the model's next token after the row's prefix (own tokens, then
    // the drafts before the row).
    std::vector<int> tokens;
    for (const ScheduledSeq& ss : out.seqs) {
      if (!ss.sample) continue;
      std::vector<int> prefix = ss.seq->token_ids;
      for (int i = 0; i <= ss.num_spec_tokens; ++i) {
        tokens.push_back(model_next(prefix));
        if (i < ss.num_spec_tokens) prefix.push_back(ss.seq->spec_token_ids[size_t(i)]);
      }
      // The drafts' slots exist: blocks cover size() + k tokens.
      EXPECT_GE(int64_t(ss.seq->block_table.size()) * kBs, int64_t(ss.seq->size()) + ss.num_spec_tokens);
      r.drafted += ss.num_spec_tokens;
    }
    sched.postprocess(out, tokens, stop);
    for (const ScheduledSeq& ss : out.seqs) r.accepted += ss.seq->num_spec_accepted;
    const BlockManager& bm = sched.block_manager();
    EXPECT_NO_THROW(bm.check_invariants()) << "step " << step;
    for (const ScheduledSeq& ss : out.seqs) {
      if (!ss.seq->is_finished()) {
        EXPECT_TRUE(ss.seq->spec_token_ids.empty()) << "drafts kept after postprocess";
      }
    }
    for (Sequence* s : sched.running()) {
      if (s->prefilled) {
        EXPECT_EQ(s->num_cached_tokens, s->size() - 1) << "step " << step;
        EXPECT_LE(int(s->block_table.size()), s->num_blocks()) << "draft blocks left after step " << step;
      }
      for (int b = 0; b < int(s->block_table.size()); ++b) {
        const Block& blk = bm.block(s->block_table[size_t(b)]);
        if (!blk.has_hash) continue;
        EXPECT_LT(b, s->num_blocks());
        const auto content = s->block(b);
        EXPECT_TRUE(std::equal(content.begin(), content.end(), blk.token_ids.begin(), blk.token_ids.end()))
            << "a registered block holds tokens the sequence did not accept (step " << step << ")";
      }
    }
  }
  for (const auto& s : seqs) {
    EXPECT_TRUE(s->is_finished());
    r.tokens[s->seq_id] = std::vector<int>(s->completion_token_ids().begin(), s->completion_token_ids().end());
  }
  EXPECT_EQ(sched.block_manager().num_free_blocks(), num_blocks);
  return r;
}

TEST(SpecScheduler, RandomDraftsGiveThePlainOutputWithPreemptionAndSharing) {
  std::mt19937 rng(11);
  for (SchedulePolicy policy : {SchedulePolicy::kPrefillFirst, SchedulePolicy::kMixed}) {
    for (int round = 0; round < 6; ++round) {
      std::vector<std::vector<int>> prompts;
      std::vector<int> shared;
      for (int i = 0; i < 9; ++i) shared.push_back(int(rng() % 5));
      for (int i = 0; i < 8; ++i) {
        std::vector<int> p = i % 2 ? shared : std::vector<int>{};
        for (unsigned k = 1 + rng() % 10; k > 0; --k) p.push_back(int(rng() % 5));
        prompts.push_back(p);
      }
      const int blocks = round < 3 ? 200 : 20;  // 20: preemption
      const SimResult plain = simulate(prompts, 30, policy, blocks, false, 0);
      const SimResult spec = simulate(prompts, 30, policy, blocks, true, uint32_t(round));
      EXPECT_EQ(plain.tokens, spec.tokens) << "policy " << int(policy) << " round " << round;
      EXPECT_GT(spec.accepted, 0);
      EXPECT_LT(spec.accepted, spec.drafted);
      if (round >= 3) {
        EXPECT_GT(spec.preemptions + plain.preemptions, 0) << "round " << round;
      }
    }
  }
}

// may_append with lookahead allocates the drafts' blocks; trim frees them; a block filled by
// accepted tokens is registered at the next may_append (not before: its tokens are accepted only
// then), and the chain of hashes equals the one plain decoding builds.
TEST(SpecScheduler, LookaheadBlocksAndRegistration) {
  BlockManager bm(10, 4);
  auto s = make_seq(1, {1, 2, 3}, 4);
  bm.allocate(*s);
  ASSERT_EQ(s->block_table.size(), 1u);
  EXPECT_EQ(bm.blocks_to_append(*s, 6), 2);  // 3 + 6 = 9 tokens: 3 blocks
  bm.may_append(*s, 6);
  EXPECT_EQ(s->block_table.size(), 3u);
  EXPECT_EQ(bm.num_free_blocks(), 7);
  // Two drafts accepted + a bonus token: 6 tokens, 2 blocks needed.
  for (int t : {4, 5, 6}) s->append_token(t);
  bm.trim(*s);
  EXPECT_EQ(s->block_table.size(), 2u);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  EXPECT_FALSE(bm.block(s->block_table[0]).has_hash) << "registered before the next step";
  bm.may_append(*s, 0);
  EXPECT_TRUE(bm.block(s->block_table[0]).has_hash);
  EXPECT_EQ(bm.block(s->block_table[0]).hash, BlockManager::compute_hash(std::vector<int>{1, 2, 3, 4}, std::nullopt));
  EXPECT_FALSE(bm.block(s->block_table[1]).has_hash);
  // Far ahead: several blocks filled at once are registered in chain order.
  for (int t : {7, 8, 9, 10, 11, 12, 13}) s->append_token(t);  // 13 tokens
  bm.may_append(*s, 0);
  ASSERT_EQ(s->block_table.size(), 4u);
  const uint64_t h0 = BlockManager::compute_hash(std::vector<int>{1, 2, 3, 4}, std::nullopt);
  const uint64_t h1 = BlockManager::compute_hash(std::vector<int>{5, 6, 7, 8}, h0);
  const uint64_t h2 = BlockManager::compute_hash(std::vector<int>{9, 10, 11, 12}, h1);
  EXPECT_EQ(bm.block(s->block_table[1]).hash, h1);
  EXPECT_EQ(bm.block(s->block_table[2]).hash, h2);
  EXPECT_FALSE(bm.block(s->block_table[3]).has_hash);
  EXPECT_NO_THROW(bm.check_invariants());
  bm.deallocate(*s);
  EXPECT_EQ(bm.num_free_blocks(), 10);
}

}  // namespace
}  // namespace nanovllm
