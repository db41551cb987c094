// Config::validate (include/nanovllm/config.h).
#include "nanovllm/config.h"

#include "engine/scheduler.h"
#include "kernels/quantized.h"
#include "util/check.h"

namespace nanovllm {

void Config::validate() const {
  backend.validate();
  if (kvcache_block_size <= 0 || kvcache_block_size % 16 != 0)
    NV_THROW("kvcache_block_size must be a positive multiple of 16, got ", kvcache_block_size);
  if (max_num_seqs < 1) NV_THROW("max_num_seqs must be >= 1, got ", max_num_seqs);
  if (max_num_batched_tokens < 1)
    NV_THROW("max_num_batched_tokens must be >= 1, got ", max_num_batched_tokens);
  if (max_model_len < 1) NV_THROW("max_model_len must be >= 1, got ", max_model_len);
  if (tensor_parallel_size < 1)
    NV_THROW("tensor_parallel_size must be >= 1, got ", tensor_parallel_size);
  if (!(dist_timeout_s > 0)) NV_THROW("dist_timeout_s must be > 0, got ", dist_timeout_s);
  parse_schedule_policy(policy);  // throws naming the value
  if (device != "auto" && device != "cpu" && device != "cuda")
    NV_THROW("device must be auto, cpu or cuda, got '", device, "'");
  if (!(gpu_memory_utilization > 0.f && gpu_memory_utilization <= 1.f))
    NV_THROW("gpu_memory_utilization must be in (0, 1], got ", gpu_memory_utilization);
  parse_quant_scheme(quantization);  // throws naming the value and the choices
  if (lm_head_quantization != "auto") parse_quant_scheme(lm_head_quantization);
  if (kv_cache_dtype != "auto" && kv_cache_dtype != "f32" && kv_cache_dtype != "bf16")
    NV_THROW("kv_cache_dtype must be auto, f32 or bf16, got '", kv_cache_dtype, "'");
  if (num_kvcache_blocks != -1 && num_kvcache_blocks < 1)
    NV_THROW("num_kvcache_blocks must be -1 (auto) or >= 1, got ", num_kvcache_blocks);
  if (num_threads < 0) NV_THROW("num_threads (--threads) must be >= 0 (0: all cores), got ", num_threads);
  if (max_waiting < 0) NV_THROW("max_waiting must be >= 0 (0: unbounded), got ", max_waiting);
}

}  // namespace nanovllm
