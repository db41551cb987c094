// Host-side policy for CUDA graphs: which batch sizes get a graph, which graph a batch uses,
// how wide block tables are, and the layout of the one staging buffer that carries a step's
// inputs. Two kinds of graph: decode (one query token per sequence) and, with speculative
// decoding, verification (1..q_max query tokens per sequence: the token and its drafts; every
// row sampled). Header-only (no CUDA) so it is unit-tested on the CPU.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "util/check.h"

namespace nanovllm {

// Largest batch captured as a graph (nano-vLLM: 512).
constexpr int kMaxGraphBatch = 512;

// 1, 2, 4, 8, then 16, 32, ..., 512, keeping only sizes <= max_num_seqs (nano-vLLM's list).
inline std::vector<int> graph_batch_sizes(int max_num_seqs) {
  NV_CHECK(max_num_seqs >= 1, "max_num_seqs must be >= 1, got ", max_num_seqs);
  std::vector<int> out;
  for (int b : {1, 2, 4, 8})
    if (b <= max_num_seqs) out.push_back(b);
  for (int b = 16; b <= kMaxGraphBatch && b <= max_num_seqs; b += 16) out.push_back(b);
  return out;
}

// Smallest bucket >= batch, or -1 when batch is above the largest (run eagerly).
inline int graph_bucket_for(int batch, const std::vector<int>& buckets) {
  NV_CHECK(batch >= 1, "batch must be >= 1, got ", batch);
  for (int b : buckets)
    if (b >= batch) return b;
  return -1;
}
// Same with the default list (max_num_seqs = 512).
inline int graph_bucket_for(int batch) {
  return graph_bucket_for(batch, graph_batch_sizes(kMaxGraphBatch));
}

// Whether hb's block tables are consistent (num_seqs rows of block_table_stride) and every
// sequence's blocks fit a graph's table width (wider rows are fine while the extra entries are
// unused, -1).
inline bool block_tables_fit(const HostBatch& hb, int table_width) {
  const int n = hb.num_seqs, stride = hb.block_table_stride;
  if (stride < 0 || hb.block_tables.size() != size_t(n) * size_t(stride)) return false;
  for (int i = 0; stride > table_width && i < n; ++i)
    for (int j = table_width; j < stride; ++j)
      if (hb.block_tables[size_t(i) * size_t(stride) + size_t(j)] >= 0) return false;
  return true;
}

// Which captured graph a step replays: its bucket, or -1 to run it eagerly. A step replays
// only when it is decode-only (one query token per sequence), samples every sequence in order
// (logits_indices = 0..n-1, which the graphs' staging fills in), fits the largest bucket, uses
// the captured block size, no context exceeds the captured max_model_len, and every sequence's
// blocks fit the graphs' block-table width.
inline int graph_replay_bucket(const HostBatch& hb, const std::vector<int>& buckets,
                               int table_width, int block_size, int max_model_len) {
  const int n = hb.num_seqs;
  if (n < 1 || !hb.decode_only || hb.num_tokens != n || hb.block_size != block_size) return -1;
  if (int(hb.logits_indices.size()) != n || int(hb.context_lens.size()) != n) return -1;
  for (int i = 0; i < n; ++i)
    if (hb.logits_indices[size_t(i)] != i || hb.context_lens[size_t(i)] > max_model_len) return -1;
  if (!block_tables_fit(hb, table_width)) return -1;
  return graph_bucket_for(n, buckets);
}

// Block-table width (blocks per sequence) for a graph: max_model_len / block_size + 1, which
// is >= ceil(max_model_len / block_size), so any sequence up to max_model_len fits.
inline int graph_block_table_width(int max_model_len, int block_size) {
  NV_CHECK(max_model_len >= 1 && block_size >= 1, "bad max_model_len=", max_model_len,
           " block_size=", block_size);
  return max_model_len / block_size + 1;
}

// Offsets (in int32 elements) of a step's inputs in the pinned staging buffer and in the
// persistent device buffer (identical layouts, one memcpy per step). Every array starts on a
// 16-element (64-byte) boundary. Sized for the largest bucket: `max_batch` sequences and
// `max_tokens` query tokens (decode graphs: max_batch; verification graphs: bucket * q_max).
struct DecodeStagingLayout {
  int max_batch = 0, max_tokens = 0, table_width = 0;
  int64_t input_ids = 0, positions = 0, slot_mapping = 0, context_lens = 0, cu_seqlens_q = 0,
          logits_indices = 0, block_tables = 0;
  int64_t total = 0;  // int32 elements

  static int64_t align16(int64_t n) { return (n + 15) / 16 * 16; }
  static DecodeStagingLayout make(int max_batch, int table_width, int max_tokens = 0) {
    if (max_tokens == 0) max_tokens = max_batch;
    NV_CHECK(max_batch >= 1 && table_width >= 1 && max_tokens >= max_batch,
             "bad staging layout: max_batch=", max_batch, " table_width=", table_width,
             " max_tokens=", max_tokens);
    DecodeStagingLayout l;
    l.max_batch = max_batch;
    l.max_tokens = max_tokens;
    l.table_width = table_width;
    int64_t off = 0;
    auto take = [&](int64_t n) {
      int64_t o = off;
      off += align16(n);
      return o;
    };
    l.input_ids = take(max_tokens);
    l.positions = take(max_tokens);
    l.slot_mapping = take(max_tokens);
    l.context_lens = take(max_batch);
    l.cu_seqlens_q = take(max_batch + 1);
    l.logits_indices = take(max_tokens);
    l.block_tables = take(int64_t(max_batch) * table_width);
    l.total = off;
    return l;
  }
  // Bytes to copy for a bucket of `bs` sequences: everything up to the end of its block-table
  // rows (the block table is last, so a small bucket copies less).
  int64_t bytes_for(int bs) const {
    return (block_tables + int64_t(bs) * table_width) * int64_t(sizeof(int32_t));
  }
};

// Fills the staging buffer `dst` (layout l) for a decode step of n = hb-like arrays padded to
// bucket bs: padded rows get slot -1 (no KV store), context 0 (attention writes zeros),
// token 0, position 0, block table -1. Sequence i's block table row is copied from `tables`
// (row stride `stride`, its first min(stride, width) entries; the rest -1).
inline void fill_decode_staging(const DecodeStagingLayout& l, int bs, int n,
                                const int32_t* input_ids, const int32_t* positions,
                                const int32_t* slot_mapping, const int32_t* context_lens,
                                const int32_t* tables, int stride, int32_t* dst) {
  NV_CHECK(n >= 1 && n <= bs && bs <= l.max_batch, "bad decode batch n=", n, " bucket=", bs,
           " max=", l.max_batch);
  NV_CHECK(stride >= 0, "bad block table stride ", stride);
  for (int i = 0; i < bs; ++i) {
    const bool real = i < n;
    dst[l.input_ids + i] = real ? input_ids[i] : 0;
    dst[l.positions + i] = real ? positions[i] : 0;
    dst[l.slot_mapping + i] = real ? slot_mapping[i] : -1;
    dst[l.context_lens + i] = real ? context_lens[i] : 0;
    dst[l.cu_seqlens_q + i] = i;
    dst[l.logits_indices + i] = i;
    int32_t* row = dst + l.block_tables + int64_t(i) * l.table_width;
    for (int j = 0; j < l.table_width; ++j) {
      int32_t v = -1;
      if (real && j < stride) v = tables[int64_t(i) * stride + j];
      row[j] = v;
    }
    if (real) {  // blocks beyond the graph's width would be silently lost: refuse instead
      for (int j = l.table_width; j < stride; ++j)
        NV_CHECK(tables[int64_t(i) * stride + j] < 0, "sequence ", i, " uses block table entry ", j,
                 " beyond the graph's width ", l.table_width);
    }
  }
  dst[l.cu_seqlens_q + bs] = bs;
}

// ---- Verification graphs (speculative decoding) ----
//
// A verification step scores each speculating sequence's last token and its k <= K drafts
// (1 + k query rows, every row sampled) beside the other sequences' one-token decodes. Its
// graph for bucket bs is captured with bs sequence slots and T = bs * q_max token rows
// (q_max = 1 + K): the real sequences fill the first slots with their real cu_seqlens_q, the
// other slots are empty sequences (no query rows, context 0), and the rows past the real tokens
// are padding (token 0, position 0, slot -1: no KV store; logits row = itself). The prefill
// attention kernel only visits the rows of real sequences, so the captured batch says
// `padded_tail`: the attention op zeroes its output first. Padding rows then carry finite
// values (token 0's embedding plus zero attention), not stale pool memory, through the rest of
// the forward (MoE routing included); they are never returned.

// Largest verification graph bucket: speculation pays at small batches (CUDA's default cap
// is 8); a cap raised past this verifies larger batches eagerly rather than capturing graphs
// of up to 512 x 17 rows.
constexpr int kMaxVerifyGraphBatch = 64;

// Buckets for verification graphs: the decode list's sizes below cap = min(speculation batch
// cap (above it the engine does not speculate), max_num_seqs, kMaxVerifyGraphBatch), then the
// smallest one >= cap (a cap of 12 gets 1, 2, 4, 8, 16). Empty when q_max < 2 (no speculation).
inline std::vector<int> verify_graph_batch_sizes(int max_num_seqs, int spec_max_batch, int q_max) {
  if (q_max < 2 || spec_max_batch < 1 || max_num_seqs < 1) return {};
  const int cap = std::min({max_num_seqs, spec_max_batch, kMaxVerifyGraphBatch});
  std::vector<int> out;
  for (int b : graph_batch_sizes(kMaxVerifyGraphBatch)) {
    out.push_back(b);
    if (b >= cap) break;
  }
  return out;
}

// Which verification graph a step replays: its bucket, or -1 (eager, or a decode graph). A step
// qualifies when every sequence has 1..q_max query tokens, every token is sampled in order
// (logits_indices = 0..num_tokens-1, no prompt-logprob rows), it uses the captured block size,
// no context exceeds max_model_len and the block tables fit the graphs' width.
inline int graph_verify_bucket(const HostBatch& hb, const std::vector<int>& buckets, int q_max,
                               int table_width, int block_size, int max_model_len) {
  const int n = hb.num_seqs, T = hb.num_tokens;
  if (buckets.empty() || n < 1 || T < n || T > n * q_max || hb.block_size != block_size) return -1;
  if (hb.num_extra_rows != 0 || int(hb.logits_indices.size()) != T) return -1;
  if (int(hb.context_lens.size()) != n || int(hb.cu_seqlens_q.size()) != n + 1) return -1;
  if (int(hb.input_ids.size()) != T || int(hb.positions.size()) != T ||
      int(hb.slot_mapping.size()) != T)
    return -1;
  for (int r = 0; r < T; ++r)
    if (hb.logits_indices[size_t(r)] != r) return -1;
  if (hb.cu_seqlens_q[0] != 0 || hb.cu_seqlens_q[size_t(n)] != T) return -1;
  for (int i = 0; i < n; ++i) {
    const int q = hb.cu_seqlens_q[size_t(i) + 1] - hb.cu_seqlens_q[size_t(i)];
    const int ctx = hb.context_lens[size_t(i)];
    if (q < 1 || q > q_max || ctx < q || ctx > max_model_len) return -1;
  }
  if (!block_tables_fit(hb, table_width)) return -1;
  return graph_bucket_for(n, buckets);
}

// Fills the staging buffer for a verification graph of bucket bs (T = bs * q_max rows): the
// batch's n sequences and num_tokens rows, then empty sequences and padding rows (see above).
// n = 0 fills an all-padding batch (capture).
inline void fill_verify_staging(const DecodeStagingLayout& l, int bs, int q_max, const HostBatch& hb,
                                int32_t* dst) {
  const int n = hb.num_seqs, T = bs * q_max, nt = hb.num_tokens;
  NV_CHECK(n >= 0 && n <= bs && bs <= l.max_batch && T <= l.max_tokens && nt >= 0 && nt <= T,
           "bad verification batch: ", n, " sequences, ", nt, " tokens for bucket ", bs, " x ",
           q_max, " (staging ", l.max_batch, " x ", l.max_tokens, ")");
  const int stride = hb.block_table_stride;
  NV_CHECK(stride >= 0 && hb.block_tables.size() == size_t(n) * size_t(stride) &&
               (n == 0 || int(hb.cu_seqlens_q.size()) == n + 1) &&
               int(hb.input_ids.size()) >= nt && int(hb.positions.size()) >= nt &&
               int(hb.slot_mapping.size()) >= nt && int(hb.context_lens.size()) >= n,
           "bad verification batch arrays");
  for (int r = 0; r < T; ++r) {
    const bool real = r < nt;
    dst[l.input_ids + r] = real ? hb.input_ids[size_t(r)] : 0;
    dst[l.positions + r] = real ? hb.positions[size_t(r)] : 0;
    dst[l.slot_mapping + r] = real ? hb.slot_mapping[size_t(r)] : -1;
    dst[l.logits_indices + r] = r;
  }
  dst[l.cu_seqlens_q] = 0;
  for (int i = 0; i < bs; ++i) {
    const bool real = i < n;
    dst[l.cu_seqlens_q + i + 1] = real ? hb.cu_seqlens_q[size_t(i) + 1] : nt;
    dst[l.context_lens + i] = real ? hb.context_lens[size_t(i)] : 0;
    int32_t* row = dst + l.block_tables + int64_t(i) * l.table_width;
    for (int j = 0; j < l.table_width; ++j)
      row[j] = real && j < stride ? hb.block_tables[size_t(i) * size_t(stride) + size_t(j)] : -1;
    if (real) {
      for (int j = l.table_width; j < stride; ++j)
        NV_CHECK(hb.block_tables[size_t(i) * size_t(stride) + size_t(j)] < 0, "sequence ", i,
                 " uses block table entry ", j, " beyond the graph's width ", l.table_width);
    }
  }
}

}  // namespace nanovllm
