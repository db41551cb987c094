// bench_tp_decode: decode-step time at TP = N on the CPU backend, and the share of it rank 0
// spends inside collectives (all-reduces and the LM-head gather: data path; the per-step
// metadata broadcast: control path). Drives a ModelRunner directly with synthetic decode
// batches (batch B, every sequence at context length L), so the scheduler and sampler stay out
// of the numbers. Workers are `nanovllm worker` processes (the built CLI). Not a test.
//
//   bench_tp_decode --model DIR --tp 2 --batch 16 [--context 128] [--steps 50] [--threads 1]
//                   [--nanovllm build/nanovllm]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/model_runner.h"

using namespace nanovllm;

int main(int argc, char** argv) {
  std::string model, bin = std::string(NANOVLLM_SOURCE_DIR) + "/build/nanovllm";
  int tp = 1, batch = 1, context = 128, steps = 50, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") model = v;
    else if (k == "--tp") tp = std::stoi(v);
    else if (k == "--batch") batch = std::stoi(v);
    else if (k == "--context") context = std::stoi(v);
    else if (k == "--steps") steps = std::stoi(v);
    else if (k == "--threads") threads = std::stoi(v);
    else if (k == "--nanovllm") bin = v;
    else {
      std::fprintf(stderr, "bench_tp_decode: unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  if (model.empty() || batch < 1 || context < 1 || steps < 1) {
    std::fprintf(stderr, "usage: bench_tp_decode --model DIR [--tp N] [--batch B] [--context L] "
                         "[--steps S] [--threads T] [--nanovllm PATH]\n");
    return 2;
  }
  try {
    const int bs = 16, blocks_per_seq = (context + steps + bs) / bs;
    Config c;
    c.model = model;
    c.device = "cpu";
    c.num_threads = threads;
    c.tensor_parallel_size = tp;
    c.worker_command = {bin, "worker"};
    c.kvcache_block_size = bs;
    c.num_kvcache_blocks = batch * blocks_per_seq;
    c.max_num_seqs = batch;
    const ModelConfig mc = ModelConfig::from_dir(model);
    c.max_model_len = std::min(mc.max_position_embeddings, blocks_per_seq * bs);
    ModelRunner runner(resolve(c), mc);

    // Sequence b owns blocks [b * blocks_per_seq, ...); its KV is whatever the cache holds
    // (the cost of a decode step does not depend on the values).
    auto make_step = [&](int pos) {
      HostBatch hb;
      hb.block_size = bs;
      hb.block_table_stride = blocks_per_seq;
      hb.num_seqs = hb.num_tokens = batch;
      hb.decode_only = true;
      hb.max_seqlen_q = 1;
      hb.max_seqlen_k = pos + 1;
      hb.cu_seqlens_q.push_back(0);
      for (int b = 0; b < batch; ++b) {
        hb.input_ids.push_back((7 * b + pos) % mc.vocab_size);
        hb.positions.push_back(pos);
        hb.slot_mapping.push_back((b * blocks_per_seq + pos / bs) * bs + pos % bs);
        hb.cu_seqlens_q.push_back(b + 1);
        hb.context_lens.push_back(pos + 1);
        for (int k = 0; k < blocks_per_seq; ++k) hb.block_tables.push_back(b * blocks_per_seq + k);
        hb.logits_indices.push_back(b);
      }
      return hb;
    };
    for (int w = 0; w < 3; ++w) runner.run(make_step(context - 3 + w));  // warm-up
    runner.communicator().reset_stats();
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) runner.run(make_step(context + s));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const CommStats& d = runner.communicator().data_stats();
    const CommStats& ctl = runner.communicator().control_stats();
    std::printf("{\"model\":\"%s\",\"tp\":%d,\"threads_per_rank\":%d,\"batch\":%d,\"context\":%d,"
                "\"steps\":%d,\"step_ms\":%.3f,\"tokens_per_s\":%.1f,\"collectives_per_step\":%.1f,"
                "\"collective_ms_per_step\":%.3f,\"broadcast_ms_per_step\":%.3f,\"comm_share\":%.3f}\n",
                model.c_str(), tp, threads, batch, context, steps, 1e3 * secs / steps,
                batch * steps / secs, double(d.calls) / steps, 1e3 * d.seconds / steps,
                1e3 * ctl.seconds / steps, (d.seconds + ctl.seconds) / secs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tp_decode: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
