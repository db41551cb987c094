// `nanovllm bench`: nano-vLLM's bench.py workload, draw for draw (CPython's random.seed(0);
// per sequence a prompt length randint(100, 1024) then that many randint(0, 10000) ids; after all
// prompts one max_tokens = randint(100, 1024) per sequence), temperature 0.6, ignore_eos.
// One untimed warm-up generate, then the wall time of one generate call.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "engine/stats_json.h"
#include "engine_flags.h"
#include "nanovllm/llm.h"
#include "testing/make_model.h"
#include "testing/py_random.h"
#include "util/check.h"
#include "util/cpu_features.h"

namespace nanovllm::cli {
namespace {

namespace fs = std::filesystem;

int run_bench(int argc, char** argv) {
  CLI::App app{"Throughput on nano-vLLM's bench.py workload", "nanovllm bench"};
  Config cfg;
  int num_seqs = 256, min_in = 100, max_in = 1024, min_out = 100, max_out = 1024;
  int max_token_id = 10000;
  std::string random_preset, arch = "qwen3", dtype = "bf16", cache_dir;
  bool json = false, no_progress = false;
  uint64_t seed = 0;
  float temperature = 0.6f;
  app.add_option("--model", cfg.model, "Hugging Face model directory");
  app.add_option("--random-model", random_preset, "make (once) and use a random model: tiny|small|qwen3-0.6b");
  app.add_option("--arch", arch, "architecture of --random-model")->capture_default_str();
  app.add_option("--dtype", dtype, "dtype of --random-model: bf16|f32")->capture_default_str();
  app.add_option("--cache-dir", cache_dir, "where random models are kept (default: ~/.cache/nanovllm)");
  app.add_option("--num-seqs", num_seqs, "sequences")->capture_default_str();
  app.add_option("--min-input-len", min_in)->capture_default_str();
  app.add_option("--max-input-len", max_in)->capture_default_str();
  app.add_option("--min-output-len", min_out)->capture_default_str();
  app.add_option("--max-output-len", max_out)->capture_default_str();
  app.add_option("--max-token-id", max_token_id, "prompt ids are randint(0, this)")->capture_default_str();
  app.add_option("--seed", seed, "random.seed() of the workload")->capture_default_str();
  app.add_option("--temperature", temperature)->capture_default_str();
  app.add_flag("--json", json, "print the result as JSON");
  app.add_flag("--no-progress", no_progress, "no progress bar");
  add_engine_flags(app, cfg);
  CLI11_PARSE(app, argc, argv);

  NV_CHECK(!cfg.model.empty() || !random_preset.empty(), "give --model DIR or --random-model PRESET");
  NV_CHECK(cfg.model.empty() || random_preset.empty(), "give only one of --model and --random-model");
  NV_CHECK(num_seqs >= 1 && min_in >= 1 && min_in <= max_in && min_out >= 1 && min_out <= max_out,
           "invalid workload: need 1 <= min <= max for input and output lengths and num_seqs >= 1");
  if (!random_preset.empty()) {
    if (cache_dir.empty()) {
      const char* home = std::getenv("HOME");
      cache_dir = std::string(home ? home : "/tmp") + "/.cache/nanovllm/models";
    }
    MakeModelOptions mo;
    mo.arch = arch;
    mo.preset = random_preset;
    mo.dtype = parse_dtype(dtype);
    mo.seed = 0;
    mo.out_dir = cache_dir + "/" + arch + "-" + random_preset + "-" + dtype;
    if (!fs::exists(fs::path(mo.out_dir) / "config.json")) {
      std::fprintf(stderr, "bench: making random model %s\n", mo.out_dir.c_str());
      make_random_model(mo);
    }
    cfg.model = mo.out_dir;
  }

  BenchWorkload w = make_bench_workload(num_seqs, min_in, max_in, min_out, max_out, max_token_id, seed);
  int64_t prompt_tokens = 0, output_tokens = 0;
  for (auto& p : w.prompts) prompt_tokens += int64_t(p.size());
  for (int m : w.max_tokens) output_tokens += m;

  LLM llm(cfg);
  // Every sequence must be able to produce all its tokens: a workload cut short by max_model_len
  // would report a throughput of another workload (max_model_len is also capped by the model's
  // max_position_embeddings and by the KV cache).
  int64_t longest = 0;
  for (int i = 0; i < num_seqs; ++i)
    longest = std::max<int64_t>(longest, int64_t(w.prompts[size_t(i)].size()) + w.max_tokens[size_t(i)]);
  NV_CHECK(longest <= llm.config().max_model_len, "the workload needs up to ", longest,
           " tokens per sequence (prompt + output) but max_model_len is ", llm.config().max_model_len,
           " (--max-model-len, capped by the model's max_position_embeddings and the KV cache); lower "
           "--max-input-len / --max-output-len");
  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;
  for (int i = 0; i < num_seqs; ++i) {
    prompts.emplace_back(w.prompts[size_t(i)]);
    SamplingParams sp;
    sp.temperature = temperature;
    sp.ignore_eos = true;
    sp.max_tokens = w.max_tokens[size_t(i)];
    params.push_back(sp);
  }
  {  // warm-up (not timed)
    SamplingParams sp;
    sp.max_tokens = 4;
    sp.ignore_eos = true;
    llm.generate({Prompt(std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8})}, {sp}, false);
    llm.trace_marker("warmup_end");  // trace-view's summary starts here, as bench's numbers do
  }
  const EngineStats s0 = llm.stats();
  auto t0 = std::chrono::steady_clock::now();
  std::vector<RequestOutput> outs = llm.generate(prompts, params, !no_progress);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const EngineStats& s = llm.stats();
  int64_t produced = 0;
  for (auto& o : outs) {
    NV_CHECK(o.error.empty(), "request ", o.request_id, " failed: ", o.error);
    produced += int64_t(o.token_ids.size());
  }
  double pf_s = s.prefill_seconds - s0.prefill_seconds, dc_s = s.decode_seconds - s0.decode_seconds;
  nlohmann::json j = {
      {"model", cfg.model},
      {"device", llm.config().device},
      {"cpu_isa", cpu_features().summary()},
      {"policy", llm.config().policy},
      {"num_seqs", num_seqs},
      {"prompt_tokens", prompt_tokens},
      {"output_tokens", produced},
      {"expected_output_tokens", output_tokens},
      {"seconds", secs},
      {"output_tokens_per_s", produced / secs},
      {"total_tokens_per_s", double(prompt_tokens + produced) / secs},
      {"prefill_tokens", s.prefill_tokens - s0.prefill_tokens},
      {"decode_tokens", s.decode_tokens - s0.decode_tokens},
      {"prefill_tokens_per_s", pf_s > 0 ? double(s.prefill_tokens - s0.prefill_tokens) / pf_s : 0.0},
      {"decode_tokens_per_s", dc_s > 0 ? double(s.decode_tokens - s0.decode_tokens) / dc_s : 0.0},
      {"peak_kv_blocks", s.peak_blocks_used},
      {"num_kv_blocks", s.num_blocks_total},
      {"block_size", llm.config().kvcache_block_size},
      {"weight_bytes", llm.weight_bytes()},
      {"preemptions", s.preemptions - s0.preemptions},
      {"max_batch_size", s.max_batch_size},
      {"steps", s.steps - s0.steps},
      {"executor", s.executor},
      {"graph_pool_bytes", s.graph_pool_bytes},
      {"graph_steps", s.graph_steps - s0.graph_steps},
      // Speculative decoding (--speculative): drafts verified / accepted in the measured part.
      {"spec_draft_tokens", s.spec_draft_tokens - s0.spec_draft_tokens},
      {"spec_accepted_tokens", s.spec_accepted_tokens - s0.spec_accepted_tokens},
      {"spec_acceptance_rate", s.spec_draft_tokens > s0.spec_draft_tokens
                                   ? double(s.spec_accepted_tokens - s0.spec_accepted_tokens) /
                                         double(s.spec_draft_tokens - s0.spec_draft_tokens)
                                   : 0.0}};
  if (json) {
    std::cout << j.dump() << std::endl;
  } else {
    std::printf("Total: %lldtok, Time: %.2fs, Throughput: %.2ftok/s\n", (long long)produced, secs,
                produced / secs);
    std::printf("prompt tokens %lld, prefill %.1f tok/s, decode %.1f tok/s, peak KV blocks %d/%d, "
                "preemptions %lld, policy %s, executor %s\n",
                (long long)prompt_tokens, j["prefill_tokens_per_s"].get<double>(),
                j["decode_tokens_per_s"].get<double>(), s.peak_blocks_used, s.num_blocks_total,
                (long long)(s.preemptions - s0.preemptions), llm.config().policy.c_str(),
                s.executor.c_str());
  }
  if (produced != output_tokens) {
    std::fprintf(stderr, "nanovllm bench: error: %lld output tokens produced, %lld expected\n", (long long)produced,
                 (long long)output_tokens);
    return 1;
  }
  return 0;
}

}  // namespace
NANOVLLM_COMMAND("bench", "Benchmark throughput on nano-vLLM's bench.py workload", run_bench);
}  // namespace nanovllm::cli
