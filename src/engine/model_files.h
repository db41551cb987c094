// What a --model path names: a Hugging Face directory (config.json, *.safetensors,
// tokenizer.json) or a GGUF model (a *.gguf file, its split set, or a directory holding one).
#pragma once
#include <map>
#include <memory>
#include <string>

#include "kernels/quantized.h"
#include "tokenizer/tokenizer.h"

namespace nanovllm {

// Throws a clear error when `model` is neither an HF directory with config.json nor a GGUF model.
void check_model_path(const std::string& model);

// The model's tokenizer, or nullptr when it has none. HF directory: its tokenizer.json (+
// tokenizer_config.json, generation_config.json). GGUF: a tokenizer.json in the file's
// directory overrides; otherwise the vocabulary, special tokens and chat template stored in
// the GGUF metadata (tokenizer.ggml.*, tokenizer.chat_template).
std::unique_ptr<Tokenizer> load_model_tokenizer(const std::string& model);

// --quantization auto for `model`: none for safetensors; for a GGUF model, the engine scheme
// its linear weights' ggml types map to (by the parameter count of each type):
//   Q4_0                            -> int4-g32     (a lossless repack: same q, same f16 scale)
//   Q4_1, Q4_K                      -> int4-g32-zp  (Q4_1 lossless; Q4_K: see below)
//   Q8_0, Q5_0, IQ4_NL              -> int8-g32     (lossless: the file's grid is int8-g32's, or a
//                                                    coarser one the quantizer finds exactly)
//   Q5_1, IQ4_XS, Q2_K, Q3_K        -> int8-g32     (within half an int8 step of a group's largest
//                                                    weight; exact where a group's grid allows)
//   Q5_K, Q6_K                      -> int8         (per row; they run as stored: see below)
//   F32, F16, BF16                  -> none
// The majority's scheme: reported as the model's quantization; it sets the LM head's default
// (per-tensor schemes below serve the linears and the MoE experts). On the CPU under auto, Q4_K
// Q5_K and Q6_K linears run as stored instead (int4-g32-zp-k, int5-g32-zp-k, int6-g16-k: ModelLoadOptions::
// checkpoint_int4), Q3_K in its own form (int3-g16-k) and IQ4_NL / IQ4_XS as table codes
// (int4-g32-nl), Q2_K in its own form (int2-g16-zp-k), Q5_1 as 5-bit codes with its f16 scales and mins
// (int5-g32-zp), all lossless; a fused weight whose parts differ in form (a Q4_K q / k
// with a Q6_K v) runs each part in its own (a composite weight, models/decoder.h
// mixed_quantized_parts), and the table's schemes serve the parts that are not stored as they are.
QuantScheme gguf_default_quantization(const std::string& model);

// --lm-head-quantization auto for `model` on the CPU: int6-g16-k (int5-g32-zp-k, int3-g16-k, int2-g16-zp-k) when
// the GGUF's LM head (output.weight, else the tied token_embd.weight) is Q6_K (Q5_K, Q3_K, Q2_K), as llama-quantize
// writes it for Q4_0 / Q4_K_M / Q5_K_M files; none (no opinion) otherwise.
QuantScheme gguf_lm_head_quantization(const std::string& model);

// --quantization auto, per linear weight (HF names, as the GGUF loader serves them): the scheme
// of that tensor's own ggml type, by the table above. Mixed files (Q4_K_M keeps attn_v and
// ffn_down in Q6_K; llama-quantize falls back to F16 / Q8_0 / Q5_0 for rows that are not whole
// blocks) keep each tensor's precision instead of taking the majority's. Empty for other models.
std::map<std::string, QuantScheme> gguf_tensor_quantization(const std::string& model);

}  // namespace nanovllm
