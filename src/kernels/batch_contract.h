// The step's batch metadata contract, checked on the host where the batch is made, before any
// of it goes to a device (kernels cannot report errors, and the CPU and CUDA kernels must not
// see different inputs). See kernels/README.md for what the kernels do with values that get
// through anyway.
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace nanovllm {

// What the batch's values index into.
struct BatchLimits {
  int64_t vocab_size = 0;     // input_ids in [0, vocab_size)
  int64_t max_positions = 0;  // rows of the RoPE table: positions in [0, max_positions)
  int64_t num_blocks = 0;     // KV cache blocks: block table entries in [-1, num_blocks)
  int block_size = 0;         // tokens per block (must equal the batch's block_size)
};

// Array sizes only (O(1)): input_ids / positions / slot_mapping have num_tokens entries,
// cu_seqlens_q num_seqs + 1, context_lens num_seqs, block_tables num_seqs * block_table_stride;
// counts, block_size and max_seqlen_* non-negative (block_size >= 1 when num_seqs > 0).
// Backend::upload_batch calls it on every backend.
void check_batch_layout(const HostBatch& hb);

// check_batch_layout, then every value (O(num_tokens + num_seqs * block_table_stride)):
//   cu_seqlens_q: starts at 0, non-decreasing, ends at num_tokens; seqlen_q(b) <= max_seqlen_q
//   decode_only: every seqlen_q == 1
//   context_lens[b] >= seqlen_q(b), <= max_seqlen_k, <= block_table_stride * block_size
//   block_tables: entries in [-1, num_blocks); the ceil(context_lens[b] / block_size) blocks a
//     sequence reads are all present (>= 0)
//   input_ids in [0, vocab_size); positions in [0, max_positions) and equal to the token's key
//     position context_lens[b] - seqlen_q(b) + i (what attention assumes)
//   slot_mapping: -1, or the slot of the token's position in its block table (so store_kv
//     writes where attention reads)
//   logits_indices in [0, num_tokens)
// A violation throws nanovllm::Error naming the field, the index, the value and the range.
void validate_batch(const HostBatch& hb, const BatchLimits& limits);

}  // namespace nanovllm
