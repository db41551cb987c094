// `nanovllm logits`: the model's logits at every position of a prompt, as a float32 .npy
// [T, vocab] (for comparison with the numpy / transformers references).
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "command.h"
#include "engine/model_runner.h"
#include "engine_flags.h"

namespace nanovllm::cli {
namespace {

void write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  NV_CHECK(f.good(), "cannot write '", path, "'");
  const char magic[] = "\x93NUMPY\x01\x00";
  f.write(magic, 8);
  uint16_t hl = uint16_t(header.size());
  f.write(reinterpret_cast<const char*>(&hl), 2);
  f.write(header.data(), std::streamsize(header.size()));
  f.write(reinterpret_cast<const char*>(data), std::streamsize(rows * cols * 4));
  NV_CHECK(f.good(), "short write to '", path, "'");
}

int run_logits(int argc, char** argv) {
  CLI::App app{"Write the logits at every prompt position as a float32 .npy [T, vocab]",
               "nanovllm logits"};
  Config cfg;
  std::string ids_str, out;
  app.add_option("--model", cfg.model, "Hugging Face model directory")->required();
  app.add_option("--prompt-ids", ids_str, "prompt token ids, e.g. 1,2,3")->required();
  app.add_option("--out", out, "output .npy path")->required();
  add_config_flags(app, cfg, {"device", "kvcache_block_size", "num_threads", "quantization",
                              "lm_head_quantization", "kv_cache_dtype"});
  CLI11_PARSE(app, argc, argv);

  std::vector<int> ids = parse_ids(ids_str);
  NV_CHECK(!ids.empty(), "empty prompt");
  ModelConfig mc = ModelConfig::from_dir(cfg.model);
  for (int id : ids) NV_CHECK(id < mc.vocab_size, "token id ", id, " >= vocab size ", mc.vocab_size);
  const int T = int(ids.size()), bs = cfg.kvcache_block_size;
  cfg.max_model_len = std::max(T, 16);
  NV_CHECK_LE(T, mc.max_context_len(), "prompt longer than the model's context (max_position_embeddings)");
  cfg.num_kvcache_blocks = (T + bs - 1) / bs;
  cfg.enforce_eager = true;  // one prefill step: no CUDA graphs to capture
  ModelRunner runner(resolve(cfg), mc);

  HostBatch hb;
  hb.num_seqs = 1;
  hb.num_tokens = T;
  hb.block_size = bs;
  hb.block_table_stride = cfg.num_kvcache_blocks;
  for (int i = 0; i < cfg.num_kvcache_blocks; ++i) hb.block_tables.push_back(i);
  for (int t = 0; t < T; ++t) {
    hb.input_ids.push_back(ids[size_t(t)]);
    hb.positions.push_back(t);
    hb.slot_mapping.push_back(t);
    hb.logits_indices.push_back(t);
  }
  hb.cu_seqlens_q = {0, T};
  hb.context_lens = {T};
  hb.max_seqlen_q = hb.max_seqlen_k = T;
  Tensor logits = runner.backend().to_host(runner.run(hb));  // run() leaves them on the device
  write_npy_f32(out, logits.data<float>(), logits.size(0), logits.size(1));
  return 0;
}

}  // namespace
NANOVLLM_COMMAND("logits", "Write per-position logits of a prompt as .npy", run_logits);
}  // namespace nanovllm::cli
