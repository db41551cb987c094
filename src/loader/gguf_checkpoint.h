// A GGUF model (one file, or the shards of a llama.cpp split "name-00001-of-00003.gguf") seen
// as a Hugging Face checkpoint: tensors under their HF names and shapes, and the config.json
// the engine's parser reads. The rest of the engine never sees GGUF names or layouts.
//
// Tensors: ggml's ne = {in, out} becomes HF [out, in]; llama-arch q/k rows are un-permuted
// from llama.cpp's interleaved RoPE order back to HF's rotate-half order; Gemma's stored
// (1 + w) norms go back to w; stacked MoE experts [E, out, in] become one tensor per expert.
// Block-quantized types are dequantized exactly to F32 (gguf_quants.h); F16/BF16/F32 keep
// their dtype.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/int4_groups.h"
#include "loader/gguf.h"
#include "util/tensor.h"

namespace nanovllm {

// The GGUF files a --model path names: a *.gguf file (with its split siblings), or a
// directory holding one GGUF model (one file or one split set). Empty when there is none.
// Throws when a directory holds several GGUF models or a split set is incomplete.
std::vector<std::string> gguf_model_files(const std::string& path);
inline bool is_gguf_model(const std::string& path) { return !gguf_model_files(path).empty(); }

class GgufCheckpoint {
 public:
  static std::shared_ptr<GgufCheckpoint> open(const std::string& path);

  // How an HF tensor is cut out of a GGUF tensor.
  struct Ref {
    std::shared_ptr<GgufFile> file;
    const GgufTensor* t = nullptr;
    enum class Tf { None, UnpermuteRoPE, MinusOne } tf = Tf::None;
    int heads = 0;    // UnpermuteRoPE: heads in this projection
    int expert = -1;  // >= 0: slice [expert] of a stacked [E, out, in] tensor
  };

  const GgufFile& meta() const { return *files_[0]; }  // metadata lives in the first shard
  const std::string& arch() const { return arch_; }     // general.architecture
  const std::string& path() const { return path_; }
  const std::map<std::string, Ref>& tensors() const { return refs_; }  // by HF name
  // The tensor under its HF name and shape (a host copy; F32 for block-quantized types).
  Tensor get(const std::string& hf_name) const;
  // A Q4_K linear weight (2-D, or one expert of a stack) as codes with f32 scale and min per 32:
  // what the CPU's int4 kernels hold losslessly (kernels/cpu/pack_int4.h). get_int4 throws for
  // a tensor has_int4 denies.
  // A Q5_K one likewise with 5-bit codes (Int4Groups::bits 5), a Q6_K one with 6-bit codes and
  // a scale per 16 (bits 6), a Q3_K one likewise with 3-bit codes (bits 3, zero 4: unpack_row_q3_k),
  // a Q2_K one with 2-bit codes and a scale and min per 16 (bits 2), a Q5_1 one with 5-bit codes and
  // its f16 d and m per 32 as scale and min (bits 5, no superblock factors).
  bool has_int4(const std::string& hf_name) const;
  // An IQ4_NL / IQ4_XS one as codes into ggml's table with an f32 scale per 32
  // (Int4Groups::iq4_table, bits 4; int4_table says which).
  int int4_bits(const std::string& hf_name) const;  // 4 (Q4_K, IQ4), 5 (Q5_K, Q5_1), 6 (Q6_K), 3 (Q3_K), 2 (Q2_K), 0 (none)
  bool int4_table(const std::string& hf_name) const;  // IQ4_NL / IQ4_XS
  Int4Groups get_int4(const std::string& hf_name) const;
  // config.json text equivalent to the metadata (architectures, sizes, RoPE, MoE, Gemma
  // windows, bos/eos ids, tie_word_embeddings, torch_dtype).
  std::string hf_config_json() const;
  // "Q4_K: 193, Q6_K: 33, F32: 65" (tensor counts by type, for logs and --json).
  std::string type_summary() const;

 private:
  std::string path_, arch_;
  std::vector<std::shared_ptr<GgufFile>> files_;
  std::map<std::string, Ref> refs_;
  void map_tensors();
};

}  // namespace nanovllm
