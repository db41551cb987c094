// Host-side policy for CUDA-graph decode: which batch sizes get a graph, which graph a batch
// uses, how wide block tables are, and the layout of the one staging buffer that carries a
// decode step's inputs. Header-only (no CUDA) so it is unit-tested on the CPU.
#pragma once
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
  const int stride = hb.block_table_stride;
  if (stride < 0 || hb.block_tables.size() != size_t(n) * size_t(stride)) return -1;
  if (stride > table_width) {
    for (int i = 0; i < n; ++i)
      for (int j = table_width; j < stride; ++j)
        if (hb.block_tables[size_t(i) * size_t(stride) + size_t(j)] >= 0) return -1;
  }
  return graph_bucket_for(n, buckets);
}

// Block-table width (blocks per sequence) for a graph: max_model_len / block_size + 1, which
// is >= ceil(max_model_len / block_size), so any sequence up to max_model_len fits.
inline int graph_block_table_width(int max_model_len, int block_size) {
  NV_CHECK(max_model_len >= 1 && block_size >= 1, "bad max_model_len=", max_model_len,
           " block_size=", block_size);
  return max_model_len / block_size + 1;
}

// Offsets (in int32 elements) of a decode step's inputs in the pinned staging buffer and in
// the persistent device buffer (identical layouts, one memcpy per step). Every array starts
// on a 16-element (64-byte) boundary. Sized for the largest bucket `max_batch`.
struct DecodeStagingLayout {
  int max_batch = 0, table_width = 0;
  int64_t input_ids = 0, positions = 0, slot_mapping = 0, context_lens = 0, cu_seqlens_q = 0,
          logits_indices = 0, block_tables = 0;
  int64_t total = 0;  // int32 elements

  static int64_t align16(int64_t n) { return (n + 15) / 16 * 16; }
  static DecodeStagingLayout make(int max_batch, int table_width) {
    NV_CHECK(max_batch >= 1 && table_width >= 1, "bad staging layout: max_batch=", max_batch,
             " table_width=", table_width);
    DecodeStagingLayout l;
    l.max_batch = max_batch;
    l.table_width = table_width;
    int64_t off = 0;
    auto take = [&](int64_t n) {
      int64_t o = off;
      off += align16(n);
      return o;
    };
    l.input_ids = take(max_batch);
    l.positions = take(max_batch);
    l.slot_mapping = take(max_batch);
    l.context_lens = take(max_batch);
    l.cu_seqlens_q = take(max_batch + 1);
    l.logits_indices = take(max_batch);
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

}  // namespace nanovllm
