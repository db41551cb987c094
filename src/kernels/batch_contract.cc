#include "kernels/batch_contract.h"

#include <string>

namespace nanovllm {

namespace {

// "HostBatch.<field>[<index>] = <value>" for messages.
std::string at(const char* field, int64_t i, int64_t v) {
  return std::string("HostBatch.") + field + "[" + std::to_string(i) + "] = " + std::to_string(v);
}

void need_size(const std::vector<int32_t>& v, int64_t n, const char* field, const char* why) {
  NV_CHECK(int64_t(v.size()) == n, "HostBatch.", field, " has ", v.size(), " entries, expected ",
           n, " (", why, ")");
}

}  // namespace

void check_batch_layout(const HostBatch& hb) {
  const int B = hb.num_seqs, T = hb.num_tokens;
  NV_CHECK(B >= 0 && T >= 0, "HostBatch num_seqs ", B, " and num_tokens ", T,
           " must be >= 0");
  NV_CHECK(hb.max_seqlen_q >= 0 && hb.max_seqlen_k >= 0, "HostBatch max_seqlen_q ",
           hb.max_seqlen_q, " and max_seqlen_k ", hb.max_seqlen_k, " must be >= 0");
  NV_CHECK(hb.block_size >= 1 || B == 0, "HostBatch.block_size = ", hb.block_size,
           " must be >= 1");
  NV_CHECK(hb.block_table_stride >= 0, "HostBatch.block_table_stride = ", hb.block_table_stride,
           " must be >= 0");
  need_size(hb.input_ids, T, "input_ids", "num_tokens");
  need_size(hb.positions, T, "positions", "num_tokens");
  need_size(hb.slot_mapping, T, "slot_mapping", "num_tokens");
  need_size(hb.cu_seqlens_q, int64_t(B) + 1, "cu_seqlens_q", "num_seqs + 1");
  need_size(hb.context_lens, B, "context_lens", "num_seqs");
  need_size(hb.block_tables, int64_t(B) * hb.block_table_stride, "block_tables",
            "num_seqs * block_table_stride");
}

void validate_batch(const HostBatch& hb, const BatchLimits& lim) {
  check_batch_layout(hb);
  const int B = hb.num_seqs, T = hb.num_tokens, bs = hb.block_size;
  const int64_t stride = hb.block_table_stride;
  NV_CHECK(B == 0 || bs == lim.block_size, "HostBatch.block_size = ", bs,
           " differs from the KV cache's block size ", lim.block_size);
  const int64_t num_slots = lim.num_blocks * lim.block_size;

  const auto& cu = hb.cu_seqlens_q;
  NV_CHECK(cu[0] == 0, at("cu_seqlens_q", 0, cu[0]), " must be 0");
  NV_CHECK(cu[B] == T, at("cu_seqlens_q", B, cu[B]), " must equal num_tokens = ", T);
  for (int b = 0; b < B; ++b)  // first, so every token index below is inside [0, T)
    NV_CHECK(cu[b + 1] >= cu[b], at("cu_seqlens_q", b + 1, cu[b + 1]), " is below cu_seqlens_q[",
             b, "] = ", cu[b], " (must be non-decreasing)");
  for (int b = 0; b < B; ++b) {
    const int64_t sq = int64_t(cu[b + 1]) - cu[b], ctx = hb.context_lens[b];
    NV_CHECK(sq <= hb.max_seqlen_q, "sequence ", b, " has ", sq,
             " query tokens, more than max_seqlen_q = ", hb.max_seqlen_q);
    NV_CHECK(!hb.decode_only || sq == 1, "decode_only batch but sequence ", b, " has ", sq,
             " query tokens");
    NV_CHECK(ctx >= sq, at("context_lens", b, ctx), " is below the sequence's ", sq,
             " query tokens");
    NV_CHECK(ctx <= hb.max_seqlen_k, at("context_lens", b, ctx), " exceeds max_seqlen_k = ",
             hb.max_seqlen_k);
    NV_CHECK(ctx <= stride * bs, at("context_lens", b, ctx), " needs ", (ctx + bs - 1) / bs,
             " blocks; the block table has ", stride, " columns");
    const int32_t* table = hb.block_tables.data() + b * stride;
    const int64_t needed = (ctx + bs - 1) / bs;
    for (int64_t j = 0; j < stride; ++j) {
      const int64_t blk = table[j];
      NV_CHECK(blk >= -1 && blk < lim.num_blocks, at("block_tables", b * stride + j, blk),
               " (sequence ", b, ", block ", j, ") is outside [-1, ", lim.num_blocks, ")");
      NV_CHECK(blk >= 0 || j >= needed, at("block_tables", b * stride + j, blk), " (sequence ",
               b, ", block ", j, ") is missing: context_lens[", b, "] = ", ctx, " needs ",
               needed, " blocks");
    }
    for (int64_t i = 0; i < sq; ++i) {
      const int64_t t = cu[b] + i, pos = hb.positions[t], slot = hb.slot_mapping[t];
      NV_CHECK(pos >= 0 && pos < lim.max_positions, at("positions", t, pos),
               " is outside the rotary table [0, ", lim.max_positions, ")");
      NV_CHECK(pos == ctx - sq + i, at("positions", t, pos), " but token ", i, " of sequence ",
               b, " sits at key position context_lens - seqlen_q + i = ", ctx - sq + i);
      NV_CHECK(slot >= -1 && slot < num_slots, at("slot_mapping", t, slot),
               " is outside [-1, ", num_slots, ")");
      const int64_t want = int64_t(table[pos / bs]) * bs + pos % bs;
      NV_CHECK(slot == -1 || slot == want, at("slot_mapping", t, slot), " but position ", pos,
               " of sequence ", b, " lives in slot ", want, " of its block table");
    }
  }
  for (int t = 0; t < T; ++t)
    NV_CHECK(hb.input_ids[t] >= 0 && hb.input_ids[t] < lim.vocab_size,
             at("input_ids", t, hb.input_ids[t]), " is outside the vocabulary [0, ",
             lim.vocab_size, ")");
  for (size_t s = 0; s < hb.logits_indices.size(); ++s)
    NV_CHECK(hb.logits_indices[s] >= 0 && hb.logits_indices[s] < T,
             at("logits_indices", int64_t(s), hb.logits_indices[s]), " is outside [0, ", T,
             ")");
}

}  // namespace nanovllm
