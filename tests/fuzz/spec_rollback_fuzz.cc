// libFuzzer target (clang; `make fuzz`): speculative decoding's accept / rollback path in the
// scheduler and block manager, against the same scheduler without speculation. The bytes choose
// the policy, a small cache (preemption), the block size, the prompts (a 4-token alphabet, so
// prefixes are shared and text repeats) and, per step and sequence, how many drafts and which of
// them are wrong. The "model" is a deterministic function of the prefix, so the right output is
// known. Aborts on: block-manager invariants, a registered block holding a token its sequences
// did not accept, KV bookkeeping (num_cached_tokens, blocks past what size() needs), a leak of
// blocks at the end, or an output that differs from the plain run. No model, no device.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "engine/scheduler.h"
#include "engine/stop_checker.h"
#include "util/check.h"

using namespace nanovllm;

namespace {

struct Bytes {
  const uint8_t* p;
  size_t n;
  uint8_t next() { return n ? (--n, *p++) : 0; }
};

int model_next(const std::vector<int>& prefix) {
  const size_t n = prefix.size();
  return (prefix[n - 1] * 3 + (n > 1 ? prefix[n - 2] : 0) * 5 + int(n % 2)) % 4;
}

void fail(const char* what) {
  std::fprintf(stderr, "spec_rollback_fuzz: %s\n", what);
  std::abort();
}

struct Setup {
  SchedulerConfig sc;
  std::vector<std::vector<int>> prompts;
  int max_tokens = 1;
};

std::map<uint64_t, std::vector<int>> run(const Setup& s, Bytes* drafts) {
  Scheduler sched(s.sc);
  SamplingParams sp;
  sp.max_tokens = s.max_tokens;
  sp.ignore_eos = true;
  std::deque<Sequence> seqs;
  for (size_t i = 0; i < s.prompts.size(); ++i) {
    seqs.emplace_back(i, s.prompts[i], sp, s.sc.block_size);
    try {
      sched.add(&seqs.back());
    } catch (const Error&) {
      seqs.back().status = SequenceStatus::FINISHED;  // rejected in both runs alike
    }
  }
  const int max_len = sched.max_seq_len();
  StopCheck stop = [max_len](Sequence& seq, int token, size_t) {
    return token_stop_reason(seq, token, {}, max_len);
  };
  for (int step = 0; !sched.is_finished(); ++step) {
    if (step > 20000) fail("no progress");
    if (drafts) {
      for (Sequence* q : sched.running()) {
        q->spec_token_ids.clear();
        if (!q->prefilled) continue;
        const uint8_t b = drafts->next();
        std::vector<int> prefix = q->token_ids;
        for (int i = 0; i < (b & 7); ++i) {  // right drafts unless a bit says otherwise
          int t = model_next(prefix);
          if ((b >> (3 + (i % 5))) & 1) t = (t + 1 + (drafts->next() % 3)) % 4;
          q->spec_token_ids.push_back(t);
          prefix.push_back(t);
        }
      }
    }
    const SchedulerOutput out = sched.schedule();
    std::vector<int> tokens;
    for (const ScheduledSeq& ss : out.seqs) {
      if (!ss.sample) continue;
      if (int64_t(ss.seq->block_table.size()) * s.sc.block_size < int64_t(ss.seq->size()) + ss.num_spec_tokens)
        fail("the drafts have no KV slots");
      std::vector<int> prefix = ss.seq->token_ids;
      for (int i = 0; i <= ss.num_spec_tokens; ++i) {
        tokens.push_back(model_next(prefix));
        if (i < ss.num_spec_tokens) prefix.push_back(ss.seq->spec_token_ids[size_t(i)]);
      }
    }
    sched.postprocess(out, tokens, stop);
    const BlockManager& bm = sched.block_manager();
    try {
      bm.check_invariants();
    } catch (const Error& e) {
      fail(e.what());
    }
    for (Sequence* q : sched.running()) {
      if (q->prefilled && q->num_cached_tokens != q->size() - 1) fail("num_cached_tokens != size - 1");
      if (int(q->block_table.size()) > q->num_blocks()) fail("draft blocks left after postprocess");
      for (int b = 0; b < int(q->block_table.size()); ++b) {
        const Block& blk = bm.block(q->block_table[size_t(b)]);
        if (!blk.has_hash) continue;
        auto content = q->block(b);
        if (blk.token_ids.size() != content.size() ||
            !std::equal(content.begin(), content.end(), blk.token_ids.begin()))
          fail("a registered block holds a token the sequence did not accept");
      }
    }
  }
  if (sched.block_manager().num_free_blocks() != sched.block_manager().num_blocks()) fail("blocks leaked");
  std::map<uint64_t, std::vector<int>> out;
  for (const Sequence& q : seqs) out[q.seq_id] = q.token_ids;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in{data, size};
  Setup s;
  s.sc.policy = in.next() & 1 ? SchedulePolicy::kMixed : SchedulePolicy::kPrefillFirst;
  s.sc.block_size = 1 + in.next() % 8;
  s.sc.num_kvcache_blocks = 2 + in.next() % 40;
  s.sc.max_model_len = 8 + in.next() % 120;
  s.sc.max_num_batched_tokens = s.sc.policy == SchedulePolicy::kMixed ? 1 + in.next() % 64 : 256;
  s.sc.max_num_seqs = 1 + in.next() % 8;
  s.sc.enable_prefix_caching = !(in.next() & 1);
  s.max_tokens = 1 + in.next() % 40;
  const int n = 1 + in.next() % 6;
  for (int i = 0; i < n; ++i) {
    std::vector<int> p(size_t(1 + in.next() % 24));
    for (int& t : p) t = in.next() % 4;
    s.prompts.push_back(std::move(p));
  }
  const auto plain = run(s, nullptr);
  const auto spec = run(s, &in);
  if (plain != spec) fail("speculation changed an output");
  return 0;
}
