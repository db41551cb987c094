// Paged KV-cache block allocator with prefix caching (nano-vLLM's BlockManager).
//
// The cache has num_blocks physical blocks of block_size token slots. A sequence owns a
// block table (logical block i -> physical id). A FULL block is content-addressed by a hash
// chained over all previous blocks, so a later sequence with the same token prefix can share
// the block (ref-counted) instead of recomputing its KV. Freed blocks keep their hash and can
// be revived by a later hit until they are handed out again for other content.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/sequence.h"

namespace nanovllm {

struct Block {
  int block_id = 0;
  int ref_count = 0;
  bool has_hash = false;  // true once the block is full and registered (seeds: hash != -1)
  uint64_t hash = 0;
  std::vector<int> token_ids;  // copy of the content, checked on every hit (hash collisions)
};

class BlockManager {
 public:
  BlockManager(int num_blocks, int block_size, bool enable_prefix_caching = true);

  // XXH64 (seed 0) over [prefix as 8 bytes LE, if any] + token ids as int64 LE.
  static uint64_t compute_hash(std::span<const int> token_ids, std::optional<uint64_t> prefix);

  bool can_allocate(const Sequence& seq) const;
  // Builds seq's block table for all its tokens, reusing cached full blocks of its prefix
  // (never the last block, so at least one token is computed) and setting
  // seq.num_cached_tokens. register_misses=false leaves freshly allocated full blocks
  // unhashed; the caller registers them with register_computed() once their KV is computed
  // in the current step (chunked prefill must not publish blocks computed in later steps).
  // A forked sequence (fork()) keeps its shared blocks and gets the rest allocated.
  void allocate(Sequence& seq, bool register_misses = true);
  // n > 1: `child` (same prompt as `parent`, no blocks yet) shares the parent's full prompt
  // blocks (call once the parent's prompt KV is computed: after the forward of the step that
  // samples its first token) except the block holding the last prompt token (so the child
  // computes at least one token and gets its own logits): their ref counts go up, child's
  // block_table and num_cached_tokens cover them. The child then waits for allocate() as usual.
  void fork(const Sequence& parent, Sequence& child);
  // Hashes and registers every still-unhashed full block lying inside [0, num_tokens).
  void register_computed(Sequence& seq, int num_tokens);
  void deallocate(Sequence& seq);
  // Decode: blocks for the sequence's size() tokens plus `lookahead` drafted tokens (without
  // drafts: a new block iff the last token opens one, len % block_size == 1). may_append also
  // registers every full block of the sequence's own tokens not registered yet (the block the
  // newest token fills; with speculation, every block accepted drafts filled). Blocks beyond
  // size() tokens hold drafts only: never hashed, freed by trim().
  int blocks_to_append(const Sequence& seq, int lookahead = 0) const;
  bool can_append(const Sequence& seq, int lookahead = 0) const {
    return num_free_blocks() >= blocks_to_append(seq, lookahead);
  }
  void may_append(Sequence& seq, int lookahead = 0);
  // After a verification: frees the blocks beyond those the sequence's size() tokens need.
  void trim(Sequence& seq);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int block_size() const { return block_size_; }
  int num_free_blocks() const { return static_cast<int>(free_block_ids_.size()); }
  int num_used_blocks() const { return static_cast<int>(used_block_ids_.size()); }
  bool prefix_caching() const { return enable_prefix_caching_; }
  const Block& block(int id) const { return blocks_.at(static_cast<size_t>(id)); }
  const std::deque<int>& free_block_ids() const { return free_block_ids_; }
  const std::unordered_map<uint64_t, int>& hash_to_block_id() const { return hash_to_block_id_; }

  // Throws nanovllm::Error when the bookkeeping is inconsistent (see README.md).
  void check_invariants() const;

  // Test hook: makes block `block_id` claim hash `h` (and registers it), e.g. to simulate a
  // hash collision between different token contents.
  void debug_force_hash(int block_id, uint64_t h);

 private:
  Block& allocate_block(int block_id);  // free -> used, ref_count 1, content forgotten
  void deallocate_block(int block_id);  // used -> back of the free FIFO, content kept
  void set_hash(Block& block, uint64_t h, std::span<const int> token_ids);
  void forget_hash(Block& block);

  int block_size_;
  bool enable_prefix_caching_;
  std::vector<Block> blocks_;
  std::unordered_map<uint64_t, int> hash_to_block_id_;
  std::deque<int> free_block_ids_;  // FIFO: allocate from the front, free to the back
  std::unordered_set<int> used_block_ids_;
};

}  // namespace nanovllm
