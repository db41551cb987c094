// resolve() (engine/resolved_config.h): the one place Config's strings are parsed.
#include "engine/resolved_config.h"

#include <algorithm>
#include <thread>

#include "engine/model_files.h"
#include "loader/quant_config.h"
#include "kernels/backend_factory.h"
#include "kernels/kv_cache_int8.h"
#include "util/check.h"

namespace nanovllm {

ResolvedConfig resolve(const Config& config) {
  config.validate();  // every string is one of its field's choices from here on
  ResolvedConfig r;
  r.spec = config;
  const Config& c = r.spec;
  r.device = c.device == "cuda" || (c.device == "auto" && cuda_available()) ? Device::CUDA
                                                                           : Device::CPU;
  r.policy = parse_schedule_policy(c.policy);
  // auto: none, except a GGUF model on the CPU runs its block-quantized weights on the int8 /
  // int4 kernels (engine/model_files.h says which scheme each ggml type maps to).
  r.quantization = c.quantization != "auto"    ? parse_quant_scheme(c.quantization)
                   : r.device == Device::CPU ? gguf_default_quantization(c.model)
                                             : QuantScheme{};
  if (c.quantization == "auto" && r.device == Device::CPU)
    r.tensor_quantization = gguf_tensor_quantization(c.model);
  // A GPTQ / AWQ checkpoint (an unsupported quantization_config is an error here, naming it):
  // auto on the CPU places its int4 weights on the int4 kernels as stored; any other choice
  // (and other devices) loads their exact dequantization, then applies the scheme.
  if (const auto qc = read_quant_config(c.model)) {
    r.checkpoint_quant = qc->method;
    r.checkpoint_int4 = c.quantization == "auto" && r.device == Device::CPU;
  }
  // auto: a GGUF head in Q6_K / Q5_K / Q5_1 / Q3_K / Q2_K runs as stored (int6-g16-k / int5-g32-zp-k /
  // int5-g32-zp / int3-g16-k / int2-g16-zp-k, on the CPU under auto); else the LM head follows the layers, except that int4 layers get an int8 head: on
  // qwen3-0.6b it decoded 2-6% slower than an int4 head and cut stories260K's KL by 16%
  // (docs/perf.md, "LM head"; llama.cpp's Q4_0 also keeps its output tensor at 6 bits).
  const QuantScheme stored_head = c.quantization == "auto" && r.device == Device::CPU
                                      ? gguf_lm_head_quantization(c.model) : QuantScheme{};
  if (c.lm_head_quantization != "auto") {
    r.lm_head_quantization = parse_quant_scheme(c.lm_head_quantization);
    const QuantKind k = r.lm_head_quantization.kind;
    if (k == QuantKind::Int5 || k == QuantKind::Int6 || k == QuantKind::Int3 || k == QuantKind::Int2) {  // only a file's own head can be held so
      const QuantScheme own = r.device == Device::CPU ? gguf_lm_head_quantization(c.model) : QuantScheme{};
      // (int5-g32-zp-f32 named a Q5_1 head until 2026-11-30: a saved config keeps working.)
      const bool q51_old_name = own.str() == "int5-g32-zp" && c.lm_head_quantization == "int5-g32-zp-f32";
      NV_CHECK(own.str() == c.lm_head_quantization || q51_old_name,
               "lm_head_quantization '", c.lm_head_quantization, "' keeps a GGUF's ",
               k == QuantKind::Int6 ? "Q6_K" : k == QuantKind::Int5 ? "Q5_K / Q5_1" : k == QuantKind::Int3 ? "Q3_K" : "Q2_K",
               " LM head as stored, on the CPU; the LM head of '",
               c.model, "' on ", device_name(r.device), " is not one (use auto, none or a --quantization value)");
      r.lm_head_quantization = own;
    }
  } else if (stored_head.enabled())  // a GGUF's Q6_K (Q5_K) head, llama-quantize's default, as stored
    r.lm_head_quantization = stored_head;
  else if (r.quantization.kind == QuantKind::Int4)
    r.lm_head_quantization = parse_quant_scheme("int8");
  else
    r.lm_head_quantization = r.quantization;
  r.kv_cache_dtype = c.kv_cache_dtype == "auto" ? activation_dtype(r.device)
                     : c.kv_cache_dtype == "bf16" ? DType::BF16
                     : c.kv_cache_dtype == "int8" ? kKvCacheInt8
                                                  : DType::F32;
  // One GPU per rank; on the CPU the cores are shared: cores / N threads per rank by default.
  r.num_threads = c.num_threads > 0 ? c.num_threads : c.backend.num_threads;
  if (r.num_threads <= 0)
    r.num_threads = std::max(1, int(std::thread::hardware_concurrency()) / c.tensor_parallel_size);
  r.dist_timeout = std::chrono::milliseconds(int64_t(double(c.dist_timeout_s) * 1000.0));
  r.speculative = c.speculative == "ngram"   ? SpeculativeMethod::kNgram
                  : c.speculative == "draft" ? SpeculativeMethod::kDraft
                                             : SpeculativeMethod::kNone;
  r.speculative_max_batch = c.speculative_max_batch > 0 ? c.speculative_max_batch
                            : r.device == Device::CPU   ? kCpuSpeculativeMaxBatch
                                                        : kCudaSpeculativeMaxBatch;
  return r;
}

Config ResolvedConfig::settled() const {
  Config c = spec;
  c.device = device_name(device);
  if (c.quantization == "auto")  // else as given; "gptq" / "awq": the checkpoint's int4 weights
    c.quantization = checkpoint_int4 ? checkpoint_quant : quantization.str();
  c.lm_head_quantization = lm_head_quantization.str();
  c.kv_cache_dtype = kv_cache_dtype == DType::BF16 ? "bf16"
                     : kv_cache_dtype == kKvCacheInt8 ? "int8"
                                                   : "f32";
  if (c.speculative_max_batch == 0) c.speculative_max_batch = speculative_max_batch;
  return c;
}

}  // namespace nanovllm
