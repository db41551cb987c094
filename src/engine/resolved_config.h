// A Config resolved once into the typed values the engine runs with: every string field parsed
// into its type, every `auto` settled for this machine. LLMEngine resolves its Config when it
// starts, a tensor-parallel worker the Config rank 0 sent it; ModelRunner, the scheduler and
// the engine read these values, and no code reads Config's strings outside resolve().
#pragma once
#include <chrono>
#include <map>

#include "engine/scheduler.h"
#include "kernels/quantized.h"
#include "nanovllm/config.h"
#include "util/dtype.h"

namespace nanovllm {

// speculative_max_batch's defaults (docs/perf.md, "Speculative decoding": the batch size above
// which verifying drafts stops paying).
inline constexpr int kCpuSpeculativeMaxBatch = 4;
inline constexpr int kCudaSpeculativeMaxBatch = 8;

enum class SpeculativeMethod : uint8_t { kNone, kNgram, kDraft };

struct ResolvedConfig {
  // The Config as given (validated): its numbers are read from here, and ranks > 0 receive it
  // as JSON and resolve it themselves (each machine settles `auto` for itself).
  Config spec;
  Device device = Device::CPU;   // auto: CUDA when a usable GPU is present, else the CPU
  SchedulePolicy policy = SchedulePolicy::kPrefillFirst;
  QuantScheme quantization;           // the layers' linear weights
  // auto: a GGUF's Q6_K / Q5_K / Q5_1 / Q3_K / Q2_K head as stored (CPU, quantization auto:
  // int6-g16-k / int5-g32-zp-k / int5-g32-zp / int3-g16-k / int2-g16-zp-k); else int8 with int4 layers, else the layers' scheme
  QuantScheme lm_head_quantization;
  // auto, CPU, a GGUF model: each linear weight's own scheme (model_files.h,
  // gguf_tensor_quantization); `quantization` is then the majority's (reported; the LM head's
  // default).
  std::map<std::string, QuantScheme> tensor_quantization;
  // GPTQ / AWQ checkpoints (loader/quant_config.h): checkpoint_quant is its quant_method;
  // checkpoint_int4 (quantization auto, CPU): its int4 weights run as stored
  // (ModelLoadOptions::checkpoint_int4), `quantization` (none) covers its unquantized linears
  // and the LM head stays dense unless --lm-head-quantization says otherwise.
  std::string checkpoint_quant;
  bool checkpoint_int4 = false;
  DType kv_cache_dtype = DType::F32;  // auto: the device's activation type (CPU f32, CUDA bf16)
  // CPU threads of this rank: num_threads, else backend.num_threads, else the cores divided
  // among the tensor-parallel ranks (at least 1).
  int num_threads = 1;
  std::chrono::milliseconds dist_timeout{0};  // dist_timeout_s
  SpeculativeMethod speculative = SpeculativeMethod::kNone;
  // speculative_max_batch; 0: the device's default (CPU 4, CUDA 8; docs/perf.md).
  int speculative_max_batch = 0;
  // KV sizing when another KV cache shares this one's budget (speculative decoding's draft
  // model, on rank 0): bytes it needs per block of ours, and device bytes its weights take.
  // Set by the engine, not by resolve(); ranks > 0 leave them 0.
  int64_t kv_extra_block_bytes = 0;
  int64_t kv_reserved_device_bytes = 0;

  // spec with each `auto` replaced by what it settled to (device, lm_head_quantization,
  // kv_cache_dtype): what LLM::config() reports.
  Config settled() const;
};

// Validates config (Config::validate: errors name the field), parses it and settles each
// `auto` for this machine. Throws nanovllm::Error.
ResolvedConfig resolve(const Config& config);

}  // namespace nanovllm
