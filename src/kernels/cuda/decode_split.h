// Host-side launch policy of the v2 decode attention kernel (attention_decode_v2.cu): how the
// query heads of one KV head are grouped into blocks, and how many key partitions (split-K)
// each (sequence, KV head, head group) gets. Header-only (no CUDA) so it is unit-tested on the
// CPU (tests/unit/cuda_host/decode_split_test.cc).
#pragma once
#include <algorithm>
#include <cstdint>

namespace nanovllm {

// Query heads one v2 block keeps in registers (its q slices and P.V accumulators); larger GQA
// groups are split over ceil(G / 8) blocks, each reading the KV head's rows.
constexpr int kDecodeV2MaxHeads = 8;

// G = Hq / Hkv query heads per KV head -> `groups` blocks per KV head, each with `per_block`
// heads (the last may have fewer: G - (groups - 1) * per_block >= 1), and the compile-time
// bound of the kernel instantiation (`bound` = 1, 2, 4 or 8 >= per_block).
struct DecodeV2Heads {
  int groups = 1, per_block = 1, bound = 1;
};
inline DecodeV2Heads decode_v2_heads(int G) {
  DecodeV2Heads h;
  if (G < 1) G = 1;
  h.groups = (G + kDecodeV2MaxHeads - 1) / kDecodeV2MaxHeads;
  h.per_block = (G + h.groups - 1) / h.groups;  // balanced: 9 -> 5 + 4, not 8 + 1
  h.bound = 1;
  while (h.bound < h.per_block) h.bound *= 2;
  return h;
}

// Key partitions of a decode launch: partition p covers keys [p * part_len, (p + 1) * part_len)
// and the last one runs to the sequence's context length (so an understated max_seqlen_k costs
// speed, never keys).
struct DecodeSplit {
  int splits = 1, part_len = 0;
};

// Partitions are >= kDecodeMinPart keys (shorter ones spend more on their fixed costs -- q load,
// merge, partial write -- than they win in parallelism) and a multiple of kDecodePartAlign.
constexpr int kDecodeMinPart = 256;
constexpr int kDecodePartAlign = 64;

// The split rule. `base_blocks` = B * Hkv * head groups (blocks without splitting);
// `resident_blocks` = SMs x the kernel's resident blocks per SM (the occupancy API's answer for
// the instantiation that runs). Splits = the most that still fit in ONE wave of resident
// blocks, floor(resident / base), within [1, max_seqlen_k / kDecodeMinPart]: with base >= resident
// there is already a full wave and no split; below it the blocks are cut into more, shorter
// partitions until they fill ~all block slots (more would start a second, partial wave).
// A pure function of its arguments, so a CUDA graph captured with a max_seqlen_k replays with the
// partition count (and the partials size) it was captured with.
inline DecodeSplit choose_decode_split(int max_seqlen_k, int64_t base_blocks, int64_t resident_blocks) {
  const int64_t maxk = max_seqlen_k > 0 ? max_seqlen_k : 1;
  const int64_t base = std::max<int64_t>(1, base_blocks);
  const int64_t resident = std::max<int64_t>(1, resident_blocks);
  const int64_t max_useful = std::max<int64_t>(1, maxk / kDecodeMinPart);
  int64_t want = resident / base;
  want = std::clamp<int64_t>(want, 1, max_useful);
  int64_t part = (maxk + want - 1) / want;
  part = (part + kDecodePartAlign - 1) / kDecodePartAlign * kDecodePartAlign;
  DecodeSplit sp;
  sp.part_len = int(std::min<int64_t>(part, int64_t(1) << 30));
  sp.splits = int((maxk + sp.part_len - 1) / sp.part_len);
  return sp;
}

}  // namespace nanovllm
