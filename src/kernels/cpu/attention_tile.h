// The vectorized attention kernels behind paged_attention: AVX-512 (attention_rows_avx512.cc)
// and AVX2 (attention_rows_avx2.cc) each run one two-pass kernel for every item (decode rows and
// prefill tiles alike). Internal to kernels/cpu.
#pragma once
#include <xmmintrin.h>  // _mm_prefetch

#include <cstdint>

namespace nanovllm::cpu {

// One work item: `rows` query rows of one KV head (nh adjacent heads for the rows kernel)
// against keys [0, max position] of one sequence. Per head, row r is query (q0 + r / G), head
// (h * G + r % G); its key position is first_pos + q0 + r / G and it attends keys 0 .. that
// position (causal).
// With a sliding window W > 0 (AVX2 only) a row at key position p sees keys (p - W, p].
// KV: the cache's element type: float, uint16_t (bf16 bits) or int8_t (int8 rows of D values
// and their f32 scale, kernels/kv_cache_int8.h).
template <class KV>
struct AttentionTile {
  const float* q;       // qkv base; query row of token t, head hq: q + t * q_stride + hq * D
  int64_t q_stride;     // (Hq + 2 Hkv) * D
  const KV* k_cache;    // [slots, Hkv, row]: row = D (f32, bf16) or D + 4 (int8)
  const KV* v_cache;
  int64_t kv_stride;    // Hkv * row
  const int32_t* block_table;  // this sequence's blocks
  int block_size;
  float* out;           // out row of token t, head hq: out + t * out_stride + hq * D
  int64_t out_stride;   // Hq * D
  int D, G, h;          // head_dim, q heads per KV head, KV head
  int64_t tok0;         // token index of the sequence's query 0
  int first_pos;        // key position of query 0
  int q0, q1;           // the tile's queries [q0, q1)
  float scale;          // softmax scale
  int nh = 1;           // KV heads h .. h + nh - 1 in one item (prefill tiles: 1)
  int row = 0;          // elements per (slot, head) row: D, or D + 4 for int8
  int window = 0;       // sliding window (0: none; the AVX-512 kernels are given none)
  // The item that the same thread runs next (both kernels: its first keys' K rows are prefetched into
  // L2 during this item's last pass 2; none: next_table == nullptr). Only addresses are formed.
  const int32_t* next_table = nullptr;
  int next_keys = 0;    // its keys [0, next_keys)
  int next_h = 0, next_nh = 0;
  bool k_prefetched = false;  // this item's first keys' K were prefetched by the previous item
};

// The K rows of the keys that the next pass 1 reads (this item's next chunk, or the next item's
// first one), requested towards L2 a few lines per key of pass 2 (both kernels): the memory
// stream then runs through both passes, V during pass 1 and K during pass 2. Without it pass 1
// fetched both (~2 KiB per key for 8 int8 heads of 128, about twice what a core streams while it
// computes) and pass 2, which reads V from L2, fetched nothing (docs/perf.md).
template <class KV>
struct KStream {
  const KV* cache = nullptr;
  const int64_t* off = nullptr;  // key i's first row: cache + off[i]
  int n = 0;                     // keys
  int span = 0;                  // bytes per key
  int i = 0, b = 0;              // next line: key i, byte b
  int rate = 0, credit = 0;      // lines per step() in 1/256
  int lines() const { return n * ((span + 63) / 64); }
  void step() {
    credit += rate;
    int count = credit >> 8;
    credit &= 255;
    for (; count > 0 && i < n; --count) {
      _mm_prefetch(reinterpret_cast<const char*>(cache + off[i]) + b, _MM_HINT_T2);
      b += 64;
      if (b >= span) b = 0, ++i;
    }
  }
};

// True when the AVX-512 kernel ran (CPU has it and D % 16 == 0); false: caller falls back.
// Two passes over the keys with a vectorized softmax; t.nh heads; no window (t.window ignored).
// A row's result depends only on that row, as for the AVX2 kernel below.
template <class KV>
bool attention_rows_avx512(const AttentionTile<KV>& t);
// AVX2 (with FMA and F16C; D % 8 == 0): the two-pass kernel for any number of rows, windows too.
// A row's result depends only on that row (its query, key range and the cache), never on the
// other rows or heads of the item: docs/determinism.md's batch invariance.
template <class KV>
bool attention_rows_avx2(const AttentionTile<KV>& t);

}  // namespace nanovllm::cpu
