// What rank r of a tensor-parallel group of N holds of a model, and the rules that decide it
// (vLLM's): every rule is checked with an error naming the field, its value and what would do.
//
//   query heads      Hq / N per rank (Hq % N == 0)
//   KV heads         Hkv >= N: Hkv / N per rank (Hkv % N == 0); Hkv < N: one KV head per rank,
//                    replicated on N / Hkv ranks (N % Hkv == 0): rank r holds KV head
//                    r / (N / Hkv), the one its query heads attend to
//   intermediate     I / N per rank (I % N == 0): gate_up column-parallel, down row-parallel;
//                    MoE experts alike (every rank holds every expert's slice of
//                    moe_intermediate_size / N; the router is replicated)
//   vocabulary       ceil(V / N) rows per rank, rank r from r * ceil(V / N); the last rank's
//                    missing rows are zero padding (embedding: never selected; LM head: padded
//                    logit columns dropped by the gather)
//   hidden size      replicated (norms, residual stream)
// The KV cache holds the rank's KV heads only: its block bytes shrink by Hkv / local KV heads.
#pragma once
#include <cstdint>

#include "models/model_config.h"

namespace nanovllm {

struct TpShard {
  int rank = 0;
  int world = 1;
  int num_q_heads = 0;      // on this rank
  int num_kv_heads = 0;     // on this rank
  int q_head_begin = 0;     // first global query head
  int kv_head_begin = 0;    // first global KV head
  int64_t intermediate = 0; // on this rank
  int64_t moe_intermediate = 0;  // each expert's, on this rank (MoE: experts sliced like the MLP)
  int64_t vocab_rows = 0;   // ceil(V / N): rows of the embedding / LM head shard (padded)
  int64_t vocab_begin = 0;  // first global vocabulary row

  // Throws nanovllm::Error when a rule does not hold.
  static TpShard plan(const ModelConfig& c, int rank, int world);
};

}  // namespace nanovllm
