#include "engine/draft_proposer.h"

#include <algorithm>

#include "util/check.h"

namespace nanovllm {

DraftModelProposer::DraftModelProposer(std::unique_ptr<ModelRunner> runner,
                                       const DraftProposerOptions& options)
    : runner_(std::move(runner)), options_(options) {
  NV_CHECK(runner_ != nullptr);
  NV_CHECK(options_.block_size > 0 && options_.max_num_batched_tokens > 0 && options_.max_len > 0);
  params_.temperature = 0;
  const int n = runner_->num_kvcache_blocks();
  free_blocks_.reserve(size_t(n));
  for (int b = n - 1; b >= 0; --b) free_blocks_.push_back(b);  // popped from the back: 0 first
}

void DraftModelProposer::sync(Sequence& m, const Sequence& target) {
  const auto& t = target.token_ids;
  size_t common = 0;
  const size_t n = std::min(m.token_ids.size(), t.size());
  while (common < n && m.token_ids[common] == t[common]) ++common;
  m.token_ids.resize(common);
  m.token_ids.insert(m.token_ids.end(), t.begin() + int64_t(common), t.end());
  m.last_token = m.token_ids.empty() ? -1 : m.token_ids.back();
  // The KV of the first `common` tokens is the KV of the target's; the last token is always fed
  // (its row samples draft 1), even when the target has not moved since the last call.
  m.num_cached_tokens = std::min({m.num_cached_tokens, int(common), m.size() - 1});
}

void DraftModelProposer::drop_blocks(Sequence& m) {
  free_blocks_.insert(free_blocks_.end(), m.block_table.rbegin(), m.block_table.rend());
  m.block_table.clear();
  m.num_cached_tokens = 0;
}

bool DraftModelProposer::reserve(Mirror& m, int blocks, int64_t call) {
  auto& table = m.seq->block_table;
  while (int(table.size()) > blocks) {  // rejected drafts' blocks (or a shorter target)
    free_blocks_.push_back(table.back());
    table.pop_back();
  }
  const size_t more = size_t(blocks) - table.size();
  if (more > free_blocks_.size()) {
    // Evict mirrors that do not draft in this call, least recently used first.
    std::vector<std::pair<int64_t, uint64_t>> idle;
    for (const auto& [id, other] : mirrors_)
      if (other.last_used < call && &other != &m && !other.seq->block_table.empty())
        idle.emplace_back(other.last_used, id);
    std::sort(idle.begin(), idle.end());
    for (const auto& [used, id] : idle) {
      if (more <= free_blocks_.size()) break;
      auto it = mirrors_.find(id);
      drop_blocks(*it->second.seq);
      mirrors_.erase(it);
    }
    if (more > free_blocks_.size()) return false;
  }
  for (size_t i = 0; i < more; ++i) {
    table.push_back(free_blocks_.back());
    free_blocks_.pop_back();
  }
  return true;
}

void DraftModelProposer::forward(const SchedulerOutput& so, const std::vector<std::vector<int>*>& outs) {
  const HostBatch hb = runner_->prepare(so);
  // [rows, V] F32: one row per sampling sequence, in so.seqs order.
  const Tensor logits = runner_->backend().to_host(runner_->run(hb));
  NV_CHECK(logits.dtype() == DType::F32, "draft logits must be F32");
  const int64_t V = logits.size(-1);
  const float* l = logits.data<float>();
  size_t row = 0;
  for (const ScheduledSeq& ss : so.seqs) {
    ss.seq->num_cached_tokens += ss.num_new_tokens;
    num_fed_tokens_ += ss.num_new_tokens;
    if (!ss.sample) continue;
    const float* x = l + int64_t(row) * V;
    const int best = int(std::max_element(x, x + V) - x);  // first maximum: lowest id on ties
    ss.seq->append_token(best);
    outs[row]->push_back(best);
    ++row;
  }
  NV_CHECK_EQ(int64_t(row), logits.size(0), "draft rows");
  ++num_forwards_;
}

void DraftModelProposer::propose(std::span<const DraftRequest> requests) {
  const int64_t call = ++calls_;
  const int bs = options_.block_size;
  struct Item {
    Sequence* m;
    std::vector<int>* out;
    int k;
  };
  std::vector<Item> items;
  // Every mirror asked for now is in use: none of them may be evicted for another's blocks.
  for (const DraftRequest& r : requests)
    if (auto it = mirrors_.find(r.seq->seq_id); it != mirrors_.end()) it->second.last_used = call;
  for (const DraftRequest& r : requests) {
    r.out->clear();
    const Sequence& t = *r.seq;
    // Draft i is fed at position size() - 1 + i (i < k): all must stay below the draft's limit.
    const int k = std::min(r.max_tokens, options_.max_len - t.size() + 1);
    if (k < 1 || t.size() == 0) continue;
    auto [it, fresh] = mirrors_.try_emplace(t.seq_id);
    Mirror& m = it->second;
    if (fresh) m.seq = std::make_unique<Sequence>(t.seq_id, std::vector<int>{}, params_, bs);
    m.last_used = call;
    sync(*m.seq, t);
    if (!reserve(m, (m.seq->size() + k - 1 + bs - 1) / bs, call)) continue;
    items.push_back(Item{m.seq.get(), r.out, k});
  }
  if (items.empty()) return;

  // Draft 1: each mirror's uncached tokens (the target's new ones, at least its last), in
  // chunks of at most max_num_batched_tokens per forward; a chunk reaching the end samples.
  std::vector<Item*> pending;
  for (Item& it : items) pending.push_back(&it);
  while (!pending.empty()) {
    SchedulerOutput so;
    std::vector<std::vector<int>*> outs;
    std::vector<Item*> next;
    int budget = options_.max_num_batched_tokens;
    for (Item* it : pending) {
      const int left = it->m->size() - it->m->num_cached_tokens;
      const int take = std::min(left, budget);
      if (take == 0) {
        next.push_back(it);
        continue;
      }
      budget -= take;
      so.seqs.push_back(ScheduledSeq{it->m, take, take == left, 0});
      if (take == left) outs.push_back(it->out);
      else next.push_back(it);
    }
    forward(so, outs);
    pending = std::move(next);
  }
  // Drafts 2..k: one decode forward each for the mirrors that want more.
  int max_k = 0;
  for (const Item& it : items) max_k = std::max(max_k, it.k);
  for (int i = 1; i < max_k; ++i) {
    SchedulerOutput so;
    std::vector<std::vector<int>*> outs;
    for (Item& it : items) {
      if (it.k <= i) continue;
      so.seqs.push_back(ScheduledSeq{it.m, 1, true, 0});
      outs.push_back(it.out);
    }
    forward(so, outs);
  }
}

void DraftModelProposer::release(uint64_t seq_id) {
  auto it = mirrors_.find(seq_id);
  if (it == mirrors_.end()) return;
  drop_blocks(*it->second.seq);
  mirrors_.erase(it);
}

}  // namespace nanovllm
