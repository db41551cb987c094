#include "models/tp_shard.h"

#include "util/check.h"

namespace nanovllm {

TpShard TpShard::plan(const ModelConfig& c, int rank, int world) {
  NV_CHECK(world >= 1 && rank >= 0 && rank < world, "tensor-parallel rank ", rank,
           " outside [0, ", world, ")");
  const int Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  if (Hq % world != 0)
    NV_THROW("tensor_parallel_size ", world, " does not divide the model's num_attention_heads (",
             Hq, "): use a tensor_parallel_size that divides ", Hq);
  if (Hkv >= world && Hkv % world != 0)
    NV_THROW("tensor_parallel_size ", world, " does not divide the model's num_key_value_heads (",
             Hkv, "): use a divisor of ", Hkv, " or a multiple of it (KV heads are then "
             "replicated)");
  if (Hkv < world && world % Hkv != 0)
    NV_THROW("tensor_parallel_size ", world, " exceeds the model's num_key_value_heads (", Hkv,
             ") and is not a multiple of it: KV heads can only be replicated evenly");
  if (c.intermediate_size % world != 0)
    NV_THROW("tensor_parallel_size ", world, " does not divide the model's intermediate_size (",
             c.intermediate_size, ")");
  if (c.num_experts > 0 && c.moe_intermediate_size % world != 0)
    NV_THROW("tensor_parallel_size ", world, " does not divide the model's moe_intermediate_size (",
             c.moe_intermediate_size, ")");
  TpShard s;
  s.rank = rank;
  s.world = world;
  s.num_q_heads = Hq / world;
  s.q_head_begin = rank * s.num_q_heads;
  if (Hkv >= world) {
    s.num_kv_heads = Hkv / world;
    s.kv_head_begin = rank * s.num_kv_heads;
  } else {
    s.num_kv_heads = 1;
    s.kv_head_begin = rank / (world / Hkv);
  }
  // The rank's query heads must all attend to its KV heads (GQA groups do not straddle ranks).
  const int group = Hq / Hkv;
  NV_CHECK(s.q_head_begin / group >= s.kv_head_begin &&
               (s.q_head_begin + s.num_q_heads - 1) / group < s.kv_head_begin + s.num_kv_heads,
           "tensor-parallel shard: query heads [", s.q_head_begin, ", ",
           s.q_head_begin + s.num_q_heads, ") do not map onto KV heads [", s.kv_head_begin, ", ",
           s.kv_head_begin + s.num_kv_heads, ")");
  s.intermediate = c.intermediate_size / world;
  s.moe_intermediate = c.moe_intermediate_size / world;
  s.vocab_rows = (int64_t(c.vocab_size) + world - 1) / world;
  s.vocab_begin = int64_t(rank) * s.vocab_rows;
  return s;
}

}  // namespace nanovllm
