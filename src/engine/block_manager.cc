#include "engine/block_manager.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "util/check.h"

namespace nanovllm {

static_assert(std::endian::native == std::endian::little, "hash layout assumes little-endian");

BlockManager::BlockManager(int num_blocks, int block_size, bool enable_prefix_caching)
    : block_size_(block_size), enable_prefix_caching_(enable_prefix_caching) {
  NV_CHECK_GT(num_blocks, 0, "the KV cache needs at least one block");
  NV_CHECK_GT(block_size, 0);
  blocks_.resize(static_cast<size_t>(num_blocks));
  for (int i = 0; i < num_blocks; ++i) {
    blocks_[static_cast<size_t>(i)].block_id = i;
    free_block_ids_.push_back(i);
  }
}

uint64_t BlockManager::compute_hash(std::span<const int> token_ids,
                                    std::optional<uint64_t> prefix) {
  // Same bytes as nano-vLLM: prefix.to_bytes(8, "little") + np.array(ids, int64).tobytes().
  std::vector<int64_t> buf;
  buf.reserve(token_ids.size() + 1);
  if (prefix) buf.push_back(static_cast<int64_t>(*prefix));
  for (int t : token_ids) buf.push_back(t);
  return XXH64(buf.data(), buf.size() * sizeof(int64_t), 0);
}

void BlockManager::forget_hash(Block& block) {
  if (block.has_hash) {
    auto it = hash_to_block_id_.find(block.hash);
    // Drop the index entry only if it still points here (a newer block may own the hash).
    if (it != hash_to_block_id_.end() && it->second == block.block_id) hash_to_block_id_.erase(it);
  }
  block.has_hash = false;
  block.hash = 0;
  block.token_ids.clear();
}

void BlockManager::set_hash(Block& block, uint64_t h, std::span<const int> token_ids) {
  if (block.has_hash && block.hash != h) forget_hash(block);
  block.has_hash = true;
  block.hash = h;
  block.token_ids.assign(token_ids.begin(), token_ids.end());
  hash_to_block_id_[h] = block.block_id;
}

Block& BlockManager::allocate_block(int block_id) {
  Block& block = blocks_[static_cast<size_t>(block_id)];
  NV_CHECK_EQ(block.ref_count, 0, "allocating block ", block_id, " that is in use");
  // Unlike the seeds we also remove the stale hash index entry: the block is about to hold
  // other content, and an index entry pointing at it could otherwise match equal token ids
  // under a different prefix.
  forget_hash(block);
  block.ref_count = 1;
  auto it = std::find(free_block_ids_.begin(), free_block_ids_.end(), block_id);
  NV_CHECK(it != free_block_ids_.end(), "block ", block_id, " is not free");
  free_block_ids_.erase(it);
  used_block_ids_.insert(block_id);
  return block;
}

void BlockManager::deallocate_block(int block_id) {
  NV_CHECK_EQ(blocks_[static_cast<size_t>(block_id)].ref_count, 0);
  used_block_ids_.erase(block_id);
  free_block_ids_.push_back(block_id);
}

bool BlockManager::can_allocate(const Sequence& seq) const {
  return num_free_blocks() >= seq.num_blocks() - static_cast<int>(seq.block_table.size());
}

void BlockManager::fork(const Sequence& parent, Sequence& child) {
  NV_CHECK(child.block_table.empty(), "fork: sequence ", child.seq_id, " already has blocks");
  NV_CHECK(parent.num_prompt_tokens == child.num_prompt_tokens, "fork: prompts differ");
  const int shared = std::min((parent.num_prompt_tokens - 1) / block_size_,
                              static_cast<int>(parent.block_table.size()));
  for (int i = 0; i < shared; ++i) {
    const int id = parent.block_table[static_cast<size_t>(i)];
    Block& b = blocks_[static_cast<size_t>(id)];
    NV_CHECK_GT(b.ref_count, 0, "fork: block ", id, " of sequence ", parent.seq_id, " is free");
    b.ref_count += 1;
    child.block_table.push_back(id);
  }
  child.num_cached_tokens = shared * block_size_;
}

void BlockManager::allocate(Sequence& seq, bool register_misses) {
  NV_CHECK_EQ(seq.block_size, block_size_);
  // Blocks shared by fork() stay; lookups continue after them (a chain needs their hash).
  const int forked = static_cast<int>(seq.block_table.size());
  NV_CHECK(forked == 0 || seq.num_cached_tokens == forked * block_size_, "sequence ", seq.seq_id,
           " already has blocks");
  seq.num_cached_tokens = forked * block_size_;
  const int nb = seq.num_blocks();
  std::optional<uint64_t> prev;  // hash of the previous full block (chain prefix)
  bool cache_miss = false;
  if (forked > 0) {
    const Block& last = blocks_[static_cast<size_t>(seq.block_table.back())];
    if (last.has_hash) prev = last.hash;
    else cache_miss = true;
  }
  for (int i = forked; i < nb; ++i) {
    std::span<const int> tokens = seq.block(i);
    const bool full = static_cast<int>(tokens.size()) == block_size_;
    std::optional<uint64_t> h;
    if (full) h = compute_hash(tokens, prev);
    int hit = -1;
    // The last block is never looked up so that at least one token is computed (its logits
    // give the next token).
    // A request that wants its prompt's logprobs computes every prompt row: no lookups.
    if (!cache_miss && full && enable_prefix_caching_ && i != nb - 1 && seq.params.prompt_logprobs < 0) {
      auto it = hash_to_block_id_.find(*h);
      if (it != hash_to_block_id_.end()) {
        const Block& b = blocks_[static_cast<size_t>(it->second)];
        if (std::equal(b.token_ids.begin(), b.token_ids.end(), tokens.begin(), tokens.end()))
          hit = it->second;
      }
    }
    if (hit < 0) cache_miss = true;
    int block_id;
    if (cache_miss) {
      NV_CHECK(!free_block_ids_.empty(), "no free KV block for sequence ", seq.seq_id);
      block_id = free_block_ids_.front();
      Block& b = allocate_block(block_id);
      if (full && register_misses) set_hash(b, *h, tokens);
    } else {
      block_id = hit;
      seq.num_cached_tokens += block_size_;
      Block* b;
      if (used_block_ids_.count(block_id)) {
        b = &blocks_[static_cast<size_t>(block_id)];
        b->ref_count += 1;
      } else {
        b = &allocate_block(block_id);  // revive a freed block that still holds this prefix
      }
      set_hash(*b, *h, tokens);
    }
    seq.block_table.push_back(block_id);
    prev = h;
  }
  seq.num_prefix_hit_tokens = seq.num_cached_tokens;
}

void BlockManager::register_computed(Sequence& seq, int num_tokens) {
  const int n = std::min(num_tokens / block_size_, static_cast<int>(seq.block_table.size()));
  for (int i = 0; i < n; ++i) {
    Block& b = blocks_[static_cast<size_t>(seq.block_table[static_cast<size_t>(i)])];
    if (b.has_hash) continue;
    std::optional<uint64_t> prefix;
    if (i > 0) {
      const Block& pb = blocks_[static_cast<size_t>(seq.block_table[static_cast<size_t>(i - 1)])];
      NV_CHECK(pb.has_hash, "block ", i - 1, " of sequence ", seq.seq_id, " is not registered");
      prefix = pb.hash;
    }
    std::span<const int> tokens = seq.block(i);
    set_hash(b, compute_hash(tokens, prefix), tokens);
  }
}

void BlockManager::deallocate(Sequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    Block& b = blocks_[static_cast<size_t>(*it)];
    NV_CHECK_GT(b.ref_count, 0, "double free of block ", *it);
    b.ref_count -= 1;
    if (b.ref_count == 0) deallocate_block(*it);
  }
  seq.num_cached_tokens = 0;
  seq.block_table.clear();
}

int BlockManager::blocks_to_append(const Sequence& seq, int lookahead) const {
  const int64_t tokens = int64_t(seq.size()) + std::max(lookahead, 0);
  const int64_t need = (tokens + block_size_ - 1) / block_size_;
  return int(std::max<int64_t>(0, need - int64_t(seq.block_table.size())));
}

void BlockManager::may_append(Sequence& seq, int lookahead) {
  auto& table = seq.block_table;
  NV_CHECK(!table.empty(), "may_append on sequence ", seq.seq_id, " without blocks");
  NV_CHECK_GE(lookahead, 0);
  const int more = blocks_to_append(seq, lookahead);
  NV_CHECK_LE(more, num_free_blocks(), "no free KV block for sequence ", seq.seq_id);
  for (int i = 0; i < more; ++i) {
    const int id = free_block_ids_.front();
    allocate_block(id);
    table.push_back(id);
  }
  // Register the full blocks of the sequence's own tokens that are not yet: the trailing run
  // of unhashed full blocks (all earlier ones are registered: prefill registers its blocks, and
  // every decode step registers the blocks its tokens filled). Without speculation that is at
  // most the block the newest token fills (len % block_size == 0).
  const int full = seq.size() / block_size_;
  int first = full;
  while (first > 0 && !blocks_[static_cast<size_t>(table[static_cast<size_t>(first - 1)])].has_hash)
    --first;
  for (int i = first; i < full; ++i) {
    Block& b = blocks_[static_cast<size_t>(table[static_cast<size_t>(i)])];
    std::optional<uint64_t> prefix;
    if (i > 0) prefix = blocks_[static_cast<size_t>(table[static_cast<size_t>(i - 1)])].hash;
    std::span<const int> tokens = seq.block(i);
    set_hash(b, compute_hash(tokens, prefix), tokens);
  }
  // A partial last block (the newest token's, or one holding drafts) is never registered.
  if (seq.size() % block_size_ != 0)
    NV_CHECK(!blocks_[static_cast<size_t>(table[static_cast<size_t>(full)])].has_hash,
             "partial block of sequence ", seq.seq_id, " has a hash");
}

void BlockManager::trim(Sequence& seq) {
  auto& table = seq.block_table;
  while (static_cast<int>(table.size()) > seq.num_blocks()) {
    const int id = table.back();
    Block& b = blocks_[static_cast<size_t>(id)];
    // Only drafts ever lived here: no other sequence can share it, and it was never hashed.
    NV_CHECK(b.ref_count == 1 && !b.has_hash, "trim: block ", id, " of sequence ", seq.seq_id,
             " is shared or registered");
    b.ref_count = 0;
    deallocate_block(id);
    table.pop_back();
  }
}

void BlockManager::check_invariants() const {
  const size_t n = blocks_.size();
  NV_CHECK_EQ(free_block_ids_.size() + used_block_ids_.size(), n, "free + used != all blocks");
  std::vector<char> seen(n, 0);
  for (int id : free_block_ids_) {
    NV_CHECK(id >= 0 && static_cast<size_t>(id) < n, "free block id ", id, " out of range");
    NV_CHECK(!seen[static_cast<size_t>(id)], "block ", id, " is twice in the free list");
    seen[static_cast<size_t>(id)] = 1;
    NV_CHECK(!used_block_ids_.count(id), "block ", id, " is both free and used");
    NV_CHECK_EQ(blocks_[static_cast<size_t>(id)].ref_count, 0, "free block ", id);
  }
  for (int id : used_block_ids_) {
    NV_CHECK(id >= 0 && static_cast<size_t>(id) < n, "used block id ", id, " out of range");
    NV_CHECK_GT(blocks_[static_cast<size_t>(id)].ref_count, 0, "used block ", id);
  }
  for (const auto& [h, id] : hash_to_block_id_) {
    NV_CHECK(id >= 0 && static_cast<size_t>(id) < n, "hash index points at block ", id);
    const Block& b = blocks_[static_cast<size_t>(id)];
    NV_CHECK(b.has_hash && b.hash == h, "hash index entry ", h, " points at block ", id,
             " whose hash differs");
    NV_CHECK_EQ(static_cast<int>(b.token_ids.size()), block_size_, "hashed block ", id);
  }
}

void BlockManager::debug_force_hash(int block_id, uint64_t h) {
  NV_CHECK(block_id >= 0 && block_id < num_blocks());
  Block& b = blocks_[static_cast<size_t>(block_id)];
  NV_CHECK(b.has_hash, "debug_force_hash needs a full, registered block");
  std::vector<int> tokens = b.token_ids;
  set_hash(b, h, tokens);
}

}  // namespace nanovllm
