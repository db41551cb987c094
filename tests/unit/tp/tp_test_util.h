// Shared helpers of the tensor-parallel tests: model directories (stories260K from shared data,
// random models made once per build folder, an untied odd-vocabulary variant), and configs
// whose workers are the built `nanovllm worker`.
#pragma once
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "loader/safetensors_writer.h"
#include "loader/weight_store.h"
#include "nanovllm/config.h"
#include "testing/make_model.h"

namespace nanovllm::tp_test {

inline std::string stories_dir() {
  return std::string(NANOVLLM_SHARED_DATA) + "/models/stories260K-hf";
}
inline bool have_stories() { return std::filesystem::exists(stories_dir() + "/config.json"); }

inline std::string nanovllm_bin() {
  const char* b = std::getenv("NANOVLLM_BIN");
  return b && *b ? b : std::string(NANOVLLM_BINARY_DIR) + "/nanovllm";
}

// A random f32 tiny model of `arch` (4 heads, 2 KV heads, I 192, tied embeddings).
inline std::string random_model(const std::string& arch, bool attention_bias = false) {
  const std::string d = std::string(NANOVLLM_BINARY_DIR) + "/test-models/tp-" + arch + "-tiny-f32" +
                        (attention_bias ? "-bias" : "");
  if (!std::filesystem::exists(d + "/config.json")) {
    MakeModelOptions o;
    o.arch = arch;
    o.preset = "tiny";
    o.dtype = DType::F32;
    o.seed = 11;
    o.out_dir = d;
    o.attention_bias = attention_bias;
    make_random_model(o);
  }
  return d;
}

// The random Qwen2 model (q/k/v bias) with an untied LM head and a vocabulary of 1001 rows
// (divisible by neither 2 nor 4: the vocab shards are padded). No tokenizer: prompts are ids.
inline std::string untied_odd_vocab_model() {
  const std::string d = std::string(NANOVLLM_BINARY_DIR) + "/test-models/tp-qwen2-untied-v1001";
  if (std::filesystem::exists(d + "/config.json")) return d;
  const std::string src = random_model("qwen2");
  constexpr int64_t V = 1001;
  std::ifstream cf(src + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(cf);
  cfg["vocab_size"] = V;
  cfg["tie_word_embeddings"] = false;
  cfg["eos_token_id"] = 2;
  cfg["bos_token_id"] = 1;
  WeightStore ws = WeightStore::open_dir(src);
  std::map<std::string, Tensor> out;
  for (const std::string& name : ws.names()) out[name] = ws.get(name);
  const Tensor emb = ws.get("model.embed_tokens.weight");
  const int64_t H = emb.size(1);
  Tensor e = Tensor::empty({V, H}, DType::F32), lm = Tensor::empty({V, H}, DType::F32);
  for (int64_t v = 0; v < V; ++v)
    for (int64_t h = 0; h < H; ++h) {
      e.data<float>()[v * H + h] = emb.data<float>()[v * H + h];
      lm.data<float>()[v * H + h] = emb.data<float>()[(V - 1 - v) * H + (h * 7) % H];  // untied
    }
  out["model.embed_tokens.weight"] = e;
  out["lm_head.weight"] = lm;
  std::filesystem::create_directories(d);
  write_safetensors(d + "/model.safetensors", out);
  std::ofstream(d + "/config.json") << cfg.dump(2);
  return d;
}

// CPU, one thread per rank, small paged cache; workers are the built CLI.
inline Config tp_config(const std::string& model, int tp) {
  Config c;
  c.model = model;
  c.device = "cpu";
  c.num_threads = 1;
  c.tensor_parallel_size = tp;
  c.worker_command = {nanovllm_bin(), "worker"};
  c.dist_timeout_s = 60;
  c.max_model_len = 256;
  c.kvcache_block_size = 16;
  c.num_kvcache_blocks = 64;
  c.max_num_batched_tokens = 1024;
  c.max_num_seqs = 8;
  return c;
}

}  // namespace nanovllm::tp_test
