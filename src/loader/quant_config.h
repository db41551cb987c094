// config.json's `quantization_config` for pre-quantized safetensors checkpoints: GPTQ
// (AutoGPTQ / GPTQModel, v1 and v2 zero-point formats) and AWQ (AutoAWQ GEMM packing), 4-bit.
// Everything else (fp8, compressed-tensors, bitsandbytes, Marlin / exllama repacks, 2/3/8-bit,
// AWQ GEMV) is refused with an error naming config.json, the field and the value.
// The tensor layouts are described in loader/int4_checkpoint.h.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace nanovllm {

enum class Int4Format : uint8_t {
  GptqV1,   // checkpoint_format "gptq" (the default): qzeros stores zero - 1
  GptqV2,   // checkpoint_format "gptq_v2" (GPTQModel): qzeros stores the zero itself
  AwqGemm,  // AutoAWQ version "gemm": interleaved nibbles, always zero points
};

struct Int4QuantConfig {
  Int4Format format = Int4Format::GptqV1;
  std::string method;     // "gptq" | "awq" (quant_method)
  int group_size = 128;   // input features per group; -1: one group over all of them
  bool sym = true;        // GPTQ's claim; the stored zero points decide the mapping
  bool desc_act = false;  // GPTQ act-order: g_idx orders the groups (required then)
  // AWQ's modules_to_not_convert / GPTQModel's "-:" dynamic rules: informational; a module is
  // quantized exactly when its tensors are (X.qweight instead of X.weight).
  std::vector<std::string> modules_to_not_convert;
  std::string source;     // the config.json path, for messages
  std::string str() const;  // e.g. "gptq (v1 zeros, group 128, sym, desc_act)"
};

// nullopt when `config` has no quantization_config (or it is null). Throws naming `source`, the
// field and the value for anything this loader cannot read exactly.
std::optional<Int4QuantConfig> parse_quant_config(const nlohmann::json& config,
                                                  const std::string& source);
// The same for <model_dir>/config.json; nullopt also when there is no such file (a GGUF model).
std::optional<Int4QuantConfig> read_quant_config(const std::string& model_dir);

}  // namespace nanovllm
