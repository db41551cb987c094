#include "engine/scheduler.h"

#include <algorithm>
#include <utility>

#include "util/check.h"

namespace nanovllm {

SchedulePolicy parse_schedule_policy(const std::string& name) {
  if (name == "prefill-first") return SchedulePolicy::kPrefillFirst;
  if (name == "mixed") return SchedulePolicy::kMixed;
  NV_THROW("policy must be prefill-first or mixed, got '", name, "'");
}

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_(config),
      mixed_(config.policy == SchedulePolicy::kMixed),
      max_seq_len_(0),
      block_manager_(config.num_kvcache_blocks, config.block_size, config.enable_prefix_caching) {
  NV_CHECK_GE(config.max_num_seqs, 1);
  NV_CHECK_GE(config.max_num_batched_tokens, 1);
  NV_CHECK_GE(config.max_model_len, 1);
  const int64_t cache_tokens =
      static_cast<int64_t>(config.num_kvcache_blocks) * config.block_size;
  max_seq_len_ = static_cast<int>(std::min<int64_t>(config.max_model_len, cache_tokens + 1));
}

void Scheduler::add(Sequence* seq) {
  NV_CHECK(seq != nullptr);
  NV_CHECK_EQ(seq->block_size, config_.block_size, "sequence block size");
  const int n = seq->size();
  if (n == 0) NV_THROW("prompt is empty");
  if (n > config_.max_model_len)
    NV_THROW("prompt has ", n, " tokens, more than max_model_len ", config_.max_model_len);
  if (seq->num_blocks() > block_manager_.num_blocks())
    NV_THROW("prompt has ", n, " tokens and needs ", seq->num_blocks(), " KV-cache blocks of ",
             config_.block_size, " tokens, more than the ", block_manager_.num_blocks(),
             " blocks in the cache");
  if (!mixed_ && n > config_.max_num_batched_tokens)
    NV_THROW("prompt has ", n, " tokens, more than max_num_batched_tokens ",
             config_.max_num_batched_tokens, " (raise it or use the mixed policy)");
  if (live_.count(seq->seq_id)) NV_THROW("duplicate sequence id ", seq->seq_id);
  // Only blocks shared by BlockManager::fork (n > 1), all of them computed.
  NV_CHECK(seq->num_cached_tokens == int(seq->block_table.size()) * config_.block_size,
           "a new sequence must hold no blocks but those BlockManager::fork shared");
  seq->status = SequenceStatus::WAITING;
  seq->prefilled = false;
  live_.emplace(seq->seq_id, seq);
  enqueue_waiting(seq, false);
}

void Scheduler::enqueue_waiting(Sequence* seq, bool preempted) {
  if (!config_.priority) {
    if (preempted) waiting_.push_front(seq);
    else waiting_.push_back(seq);
    return;
  }
  // Before the first waiting sequence that ranks after it: (priority, seq_id) ascending. A
  // preempted sequence is older than the new ones of its priority, so it goes before them.
  auto later = [seq](const Sequence* w) {
    return std::pair(w->params.priority, w->seq_id) > std::pair(seq->params.priority, seq->seq_id);
  };
  waiting_.insert(std::find_if(waiting_.begin(), waiting_.end(), later), seq);
}

void Scheduler::sort_running_by_priority() {
  if (!config_.priority) return;
  std::stable_sort(running_.begin(), running_.end(), [](const Sequence* a, const Sequence* b) {
    return std::pair(a->params.priority, a->seq_id) < std::pair(b->params.priority, b->seq_id);
  });
}

Sequence* Scheduler::take_victim(size_t from, Sequence* self) {
  if (running_.size() <= from) return self;
  if (!config_.priority) {
    Sequence* v = running_.back();
    running_.pop_back();
    return v;
  }
  auto rank = [](const Sequence* s) { return std::pair(s->params.priority, s->seq_id); };
  auto best = running_.begin() + std::ptrdiff_t(from);
  for (auto it = best; it != running_.end(); ++it)
    if (rank(*it) > rank(*best)) best = it;
  if (rank(self) > rank(*best)) return self;
  Sequence* v = *best;
  running_.erase(best);
  return v;
}

SchedulerOutput Scheduler::schedule() {
  return mixed_ ? schedule_mixed() : schedule_prefill_first();
}

void Scheduler::preempt(Sequence* seq, SchedulerOutput& out) {
  seq->status = SequenceStatus::WAITING;
  seq->prefilled = false;
  seq->spec_token_ids.clear();
  block_manager_.deallocate(*seq);
  enqueue_waiting(seq, true);
  ++out.num_preempted;
  ++num_preemptions_;
}

SchedulerOutput Scheduler::schedule_prefill_first() {
  SchedulerOutput out;
  int num_seqs = 0;
  int num_batched_tokens = 0;
  // Prefill: admit waiting sequences in order while the batch, the token budget and the free
  // blocks allow. The budget check uses the full length, the charge only uncached tokens.
  while (!waiting_.empty() && num_seqs < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    // A preempted sequence may have grown past the budget; it then runs alone (otherwise it
    // could never run again). Fresh prompts over the budget are rejected by add().
    if (!out.seqs.empty() && num_batched_tokens + seq->size() > config_.max_num_batched_tokens)
      break;
    if (!block_manager_.can_allocate(*seq)) break;
    ++num_seqs;
    block_manager_.allocate(*seq);
    const int n = seq->size() - seq->num_cached_tokens;
    num_batched_tokens += n;
    seq->status = SequenceStatus::RUNNING;
    waiting_.pop_front();
    running_.push_back(seq);
    out.seqs.push_back({seq, n, true});
    out.admitted.push_back(seq);
  }
  if (!out.seqs.empty()) {
    out.is_prefill = true;
    out.num_prefill_tokens = num_batched_tokens;
    return out;
  }

  // Decode: one token for each running sequence (in order); when no block is free for a
  // sequence that needs one, preempt the youngest (tail), and finally the sequence itself.
  // Priority: in priority order, so that every victim ranks after every decoded sequence.
  sort_running_by_priority();
  std::vector<Sequence*> scheduled;
  while (!running_.empty() && num_seqs < config_.max_num_seqs) {
    Sequence* seq = running_.front();
    running_.pop_front();
    bool ok = true;
    while (!block_manager_.can_append(*seq)) {
      Sequence* victim = take_victim(0, seq);
      preempt(victim, out);
      if (victim == seq) {
        ok = false;
        break;
      }
    }
    if (ok) {
      ++num_seqs;
      block_manager_.may_append(*seq);
      scheduled.push_back(seq);
    }
  }
  // Scheduled sequences go back to the front of running, in order.
  for (auto it = scheduled.rbegin(); it != scheduled.rend(); ++it) running_.push_front(*it);
  for (Sequence* seq : scheduled) out.seqs.push_back({seq, 1, true});
  out.num_decode_tokens = static_cast<int>(scheduled.size());
  int budget = config_.max_num_batched_tokens - out.num_decode_tokens;
  schedule_drafts(out, out.seqs.size(), budget);
  return out;
}

void Scheduler::schedule_drafts(SchedulerOutput& out, size_t num_decode, int& budget) {
  for (size_t i = 0; i < num_decode; ++i) {
    ScheduledSeq& ss = out.seqs[i];
    Sequence* seq = ss.seq;
    if (seq->spec_token_ids.empty()) continue;
    // Row i of a verification samples token size() + i: at most max_tokens and max_seq_len in
    // all (the last row's token included), and only blocks that are free now: a draft never
    // preempts anything, and the later sequences' own decode tokens were scheduled first.
    int64_t k = int64_t(seq->spec_token_ids.size());
    k = std::min<int64_t>(k, int64_t(max_seq_len_) - 1 - seq->size());
    k = std::min<int64_t>(k, int64_t(seq->params.max_tokens) - seq->num_completion_tokens() - 1);
    k = std::min<int64_t>(k, budget);
    const int64_t coverable =
        (int64_t(seq->block_table.size()) + block_manager_.num_free_blocks()) * config_.block_size -
        seq->size();
    k = std::max<int64_t>(0, std::min(k, coverable));
    seq->spec_token_ids.resize(size_t(k));
    if (k == 0) continue;
    block_manager_.may_append(*seq, int(k));
    ss.num_new_tokens += int(k);
    ss.num_spec_tokens = int(k);
    out.num_spec_tokens += int(k);
    budget -= int(k);
  }
}

SchedulerOutput Scheduler::schedule_mixed() {
  SchedulerOutput out;
  int budget = config_.max_num_batched_tokens;
  int num_seqs = 0;

  // 1) One decode token for every prefilled running sequence, preempting from the tail
  //    (priority: in priority order, victims the lowest ranked).
  sort_running_by_priority();
  for (size_t i = 0; i < running_.size();) {
    if (num_seqs >= config_.max_num_seqs || budget <= 0) break;
    Sequence* seq = running_[i];
    if (!seq->prefilled) {
      ++i;
      continue;
    }
    bool ok = true;
    while (!block_manager_.can_append(*seq)) {
      Sequence* victim = take_victim(i + 1, seq);
      if (victim == seq) {
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        preempt(seq, out);
        ok = false;
        break;
      }
      preempt(victim, out);
    }
    if (!ok) {
      // FCFS: seq was the last running sequence. Priority: the later ones outrank it and still
      // need their decode token.
      if (config_.priority) continue;
      break;
    }
    block_manager_.may_append(*seq);
    out.seqs.push_back({seq, 1, true});
    ++out.num_decode_tokens;
    ++num_seqs;
    --budget;
    ++i;
  }
  // 1b) Drafts of those decoding sequences (speculative decoding), before any prefill chunk.
  schedule_drafts(out, out.seqs.size(), budget);

  // 2) Prefill chunks for running sequences that are partly prefilled, in running order.
  auto schedule_chunk = [&](Sequence* seq) {
    const int remaining = seq->size() - seq->num_cached_tokens;
    const int n = std::min(remaining, budget);
    const bool sample = n == remaining;
    // Publish full blocks whose KV this step computes (not the later chunks' blocks).
    block_manager_.register_computed(*seq, seq->num_cached_tokens + n);
    out.seqs.push_back({seq, n, sample});
    out.num_prefill_tokens += n;
    budget -= n;
    ++num_seqs;
  };
  for (size_t i = 0; i < running_.size(); ++i) {
    if (num_seqs >= config_.max_num_seqs || budget <= 0) break;
    if (!running_[i]->prefilled) schedule_chunk(running_[i]);
  }

  // 3) Admit waiting sequences in order (all their blocks at once, only a chunk computed).
  //    Not in a step that had to preempt: the cache is full and they would thrash.
  if (out.num_preempted == 0) {
    while (!waiting_.empty() && num_seqs < config_.max_num_seqs && budget > 0) {
      Sequence* seq = waiting_.front();
      if (!block_manager_.can_allocate(*seq)) break;
      block_manager_.allocate(*seq, /*register_misses=*/false);
      seq->status = SequenceStatus::RUNNING;
      waiting_.pop_front();
      running_.push_back(seq);
      out.admitted.push_back(seq);
      schedule_chunk(seq);
    }
  }
  out.is_prefill = out.num_prefill_tokens > 0;
  return out;
}

void Scheduler::take(Sequence* seq, FinishReason reason) {
  auto it = live_.find(seq->seq_id);
  NV_CHECK(it != live_.end() && it->second == seq);
  if (seq->status == SequenceStatus::RUNNING) {
    auto r = std::find(running_.begin(), running_.end(), seq);
    NV_CHECK(r != running_.end());
    running_.erase(r);
  } else if (seq->status == SequenceStatus::WAITING) {
    auto w = std::find(waiting_.begin(), waiting_.end(), seq);
    NV_CHECK(w != waiting_.end());
    waiting_.erase(w);
  }
  if (!seq->block_table.empty()) block_manager_.deallocate(*seq);
  seq->status = SequenceStatus::FINISHED;
  seq->finish_reason = reason;
  live_.erase(it);
}

std::vector<Sequence*> Scheduler::postprocess(const SchedulerOutput& out, const std::vector<int>& tokens,
                                              const StopCheck& stop) {
  size_t num_rows = 0;
  for (const auto& s : out.seqs) num_rows += size_t(s.num_sample_rows());
  NV_CHECK_EQ(tokens.size(), num_rows, "one sampled token per sampled row");
  std::vector<Sequence*> finished;
  size_t t = 0;
  for (const auto& s : out.seqs) {
    const size_t row = t;
    t += size_t(s.num_sample_rows());
    Sequence* seq = s.seq;
    seq->num_spec_accepted = 0;
    seq->num_step_tokens = 0;
    // Finished (aborted) between schedule() and postprocess(): its owner keeps it alive.
    if (seq->status != SequenceStatus::RUNNING) continue;
    const int k = s.num_spec_tokens;
    NV_CHECK(k == 0 || (s.sample && int(seq->spec_token_ids.size()) == k), "sequence ", seq->seq_id,
             ": ", k, " drafts scheduled, ", seq->spec_token_ids.size(), " held");
    // The drafts' KV counts only once they are accepted.
    seq->num_cached_tokens += s.num_new_tokens - k;
    NV_CHECK_LE(seq->num_cached_tokens, seq->size(), "sequence ", seq->seq_id);
    if (!s.sample) continue;
    seq->prefilled = true;
    bool ended = false;
    for (int i = 0; i <= k; ++i) {
      const int token = tokens[row + size_t(i)];
      // Draft i equals the token sampled after its prefix: it is accepted, and the KV the step
      // computed for it (its row's input) is the KV of this token.
      const bool accepted = i < k && token == seq->spec_token_ids[size_t(i)];
      seq->num_spec_accepted += accepted ? 1 : 0;
      seq->append_token(token);
      ++seq->num_step_tokens;
      const FinishReason reason = stop(*seq, token, row + size_t(i));
      if (reason != FinishReason::kNone) {
        take(seq, reason);
        finished.push_back(seq);
        ended = true;
        break;
      }
      if (!accepted) break;
      ++seq->num_cached_tokens;
    }
    seq->spec_token_ids.clear();
    if (!ended && k > 0) block_manager_.trim(*seq);
  }
  return finished;
}

Sequence* Scheduler::finish(uint64_t seq_id, FinishReason reason) {
  auto it = live_.find(seq_id);
  if (it == live_.end()) return nullptr;
  Sequence* seq = it->second;
  take(seq, reason);
  return seq;
}

}  // namespace nanovllm
