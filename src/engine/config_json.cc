#include "engine/config_json.h"

#include <nlohmann/json.hpp>

#include "util/check.h"

namespace nanovllm {

NLOHMANN_JSON_SERIALIZE_ENUM(LinearPath, {{LinearPath::kAuto, "auto"},
                                          {LinearPath::kStreaming, "streaming"},
                                          {LinearPath::kBlas, "blas"},
                                          {LinearPath::kOnednn, "onednn"}})
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BackendOptions, num_threads, spin_us, adaptive_threads,
                                   cpu_weight_copy, linear_path, isa, cuda_prefill,
                                   cuda_decode)

// Every field of Config (include/nanovllm/config.h); a field added there must be added here
// (tp_rules_test round-trips a Config with every field changed).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Config, model, max_num_batched_tokens, max_num_seqs,
                                   max_model_len, gpu_memory_utilization, tensor_parallel_size,
                                   dist_init_addr, worker_command, dist_timeout_s, enforce_eager,
                                   kvcache_block_size, num_kvcache_blocks, cpu_kvcache_bytes,
                                   cpu_kvcache_fraction, device, policy, enable_prefix_caching,
                                   num_threads, quantization, lm_head_quantization, kv_cache_dtype,
                                   max_waiting, allow_nonfinite_weights, trace_path, backend)

#if defined(__x86_64__) && defined(__GLIBCXX__)
// Trips when Config gains a field (x86-64 libstdc++ layout): add it to the list above (workers
// would silently run with its default otherwise) and to ConfigJson.RoundTripsEveryField, then
// update the size.
static_assert(sizeof(Config) == 464, "Config changed: update the JSON field list above");
static_assert(sizeof(BackendOptions) == 112, "BackendOptions changed: update its JSON field list");
#endif

std::string config_to_json(const Config& c) { return nlohmann::json(c).dump(); }

Config config_from_json(const std::string& text) {
  try {
    return nlohmann::json::parse(text).get<Config>();
  } catch (const nlohmann::json::exception& e) {
    NV_THROW("bad engine configuration from rank 0: ", e.what());
  }
}

}  // namespace nanovllm
