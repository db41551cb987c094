#include "engine_flags.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/check.h"

namespace nanovllm::cli {

void add_weight_format_flags(CLI::App& app, Config& c) {
  app.add_option("--quantization", c.quantization,
                 "weights quantized at load (CPU): none | int8 | int4 (int4-g32, int4-g64, "
                 "int4-g32-zp, int4-g64-zp)")
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", c.kv_cache_dtype,
                 "KV cache type: auto (CPU f32, CUDA bf16) | f32 | bf16")
      ->capture_default_str();
  app.add_option("--lm-head-quantization", c.lm_head_quantization,
                 "LM head: auto (int8 with int4 layers, else as --quantization) | none | a --quantization value")
      ->capture_default_str();
}

void add_engine_flags(CLI::App& app, Config& c) {
  app.add_option("--device", c.device, "auto | cpu | cuda")->capture_default_str();
  app.add_option("--max-num-seqs", c.max_num_seqs, "max sequences per step")->capture_default_str();
  app.add_option("--max-num-batched-tokens", c.max_num_batched_tokens, "token budget per step")
      ->capture_default_str();
  app.add_option("--max-model-len", c.max_model_len, "max tokens per sequence (clipped to the model)")
      ->capture_default_str();
  app.add_option("--block-size", c.kvcache_block_size, "KV cache block size (multiple of 16)")
      ->capture_default_str();
  app.add_option("--num-kvcache-blocks", c.num_kvcache_blocks, "KV blocks (-1: from the memory budget)")
      ->capture_default_str();
  app.add_option("--kv-cache-bytes", c.cpu_kvcache_bytes, "CPU KV cache budget in bytes (0: a fraction of RAM)");
  app.add_option("--gpu-memory-utilization", c.gpu_memory_utilization, "CUDA memory fraction")
      ->capture_default_str();
  app.add_option("--tensor-parallel-size,--tp", c.tensor_parallel_size,
                 "tensor-parallel ranks (processes; ranks 1..N-1 started on this machine unless "
                 "--dist-init-addr is given)")
      ->capture_default_str();
  app.add_option("--dist-init-addr", c.dist_init_addr,
                 "HOST:PORT to serve the rendezvous on; ranks 1..N-1 are then started separately "
                 "(`nanovllm worker --rank R --tensor-parallel-size N --dist-init-addr HOST:PORT`)");
  app.add_option("--dist-timeout", c.dist_timeout_s,
                 "seconds to wait for the ranks to join, and for any collective of a step")
      ->capture_default_str();
  // Local workers are this same binary's `worker` command.
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) c.worker_command = {exe.string(), "worker"};
  app.add_flag("--enforce-eager", c.enforce_eager, "CUDA: no CUDA graphs");
  app.add_option("--policy", c.policy, "scheduling policy: prefill-first | mixed")->capture_default_str();
  app.add_flag("--no-prefix-caching{false}", c.enable_prefix_caching, "disable prefix caching");
  app.add_option("--threads", c.num_threads,
                 "CPU threads per rank (0: the cores divided among the tensor-parallel ranks)");
  add_weight_format_flags(app, c);
  app.add_flag("--allow-nonfinite-weights", c.allow_nonfinite_weights,
               "load a checkpoint even if a weight is NaN or Inf (default: error naming the tensor)");
  app.add_option("--trace", c.trace_path,
                 "write a Chrome trace (Perfetto, chrome://tracing, `nanovllm trace-view`) of every "
                 "step and request to FILE");
}

void add_sampling_flags(CLI::App& app, SamplingFlags& f) {
  app.add_option("--temperature", f.p.temperature, "0 = greedy")->capture_default_str();
  app.add_option("--top-k", f.p.top_k, "-1 = disabled")->capture_default_str();
  app.add_option("--top-p", f.p.top_p, "nucleus sampling")->capture_default_str();
  app.add_option("--min-p", f.p.min_p, "min-p filtering")->capture_default_str();
  app.add_option("--seed", f.seed, "per-request RNG seed (default: random)");
  app.add_option("--max-tokens", f.p.max_tokens, "max generated tokens")->capture_default_str();
  app.add_option("--min-tokens", f.p.min_tokens, "min generated tokens before EOS/stop");
  app.add_flag("--ignore-eos", f.p.ignore_eos, "do not stop at EOS");
  app.add_option("--stop", f.stop, "stop string (repeatable)");
  app.add_option("--stop-token-ids", f.stop_token_ids, "extra stop token ids, e.g. 1,2");
  app.add_option("--logprobs", f.p.logprobs, "return the top-N logprobs per token");
  app.add_option("--presence-penalty", f.p.presence_penalty,
                 "[-2, 2]: subtracted once from tokens generated so far")
      ->capture_default_str();
  app.add_option("--frequency-penalty", f.p.frequency_penalty,
                 "[-2, 2]: subtracted per occurrence among tokens generated so far")
      ->capture_default_str();
  app.add_option("--repetition-penalty", f.p.repetition_penalty,
                 "> 0: divides positive / multiplies negative logits of prompt and output tokens")
      ->capture_default_str();
}

SamplingParams SamplingFlags::build() const {
  SamplingParams sp = p;
  if (seed >= 0) sp.seed = uint64_t(seed);
  sp.stop = stop;
  if (!stop_token_ids.empty()) sp.stop_token_ids = parse_ids(stop_token_ids);
  sp.validate();
  return sp;
}

std::vector<int> parse_ids(const std::string& s) {
  std::vector<int> ids;
  std::string tok;
  std::stringstream ss(s);
  while (std::getline(ss, tok, ',')) {
    size_t a = tok.find_first_not_of(" \t\n"), b = tok.find_last_not_of(" \t\n");
    NV_CHECK(a != std::string::npos, "empty token id in '", s, "'");
    tok = tok.substr(a, b - a + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(tok, &used);
    } catch (...) {
      used = 0;
    }
    NV_CHECK(used == tok.size() && v >= 0 && v <= INT32_MAX, "invalid token id '", tok, "' in '", s,
             "'");
    ids.push_back(int(v));
  }
  return ids;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  NV_CHECK(f.good(), "cannot open '", path, "'");
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

}  // namespace nanovllm::cli
