// Engine configuration, with nano-vLLM's names and defaults.
//
// The fields are what the user gives (the CLI's flags, Python's keywords, the JSON rank 0 sends
// to tensor-parallel workers): strings as spelled there ("auto" included). The engine resolves
// them once, at start (engine/resolved_config.h: every string parsed into its type, every
// `auto` settled for the machine); nothing else reads these strings.
//
// A new field: a member here plus its row in fields_of() below (name, flag, help, rule); the
// CLI, JSON, Python and the README check follow from the row. Then its semantics.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nanovllm/backend_options.h"
#include "nanovllm/field.h"

namespace nanovllm {

struct Config {
  std::string model;                     // Hugging Face model directory
  int max_num_batched_tokens = 16384;    // token budget of one step
  int max_num_seqs = 512;                // sequences in one step
  int max_model_len = 4096;              // clipped to the model's max_position_embeddings
  float gpu_memory_utilization = 0.9f;   // CUDA: fraction of device memory the engine may use
  int tensor_parallel_size = 1;          // ranks (processes); rank 0 runs the engine
  // tensor_parallel_size > 1. Empty: this process starts ranks 1..N-1 on this machine with
  // worker_command. HOST:PORT: rank 0 serves the rendezvous there and ranks 1..N-1 are started
  // separately, on any machine (`nanovllm worker --rank R --tensor-parallel-size N
  // --dist-init-addr HOST:PORT`).
  std::string dist_init_addr;
  // argv prefix that starts a worker process (rank, size and address are appended), e.g.
  // {"/usr/bin/nanovllm", "worker"}. The CLI and the Python package set it.
  std::vector<std::string> worker_command;
  float dist_timeout_s = 120;            // seconds: rendezvous, and any collective of a step
  bool enforce_eager = false;            // CUDA: no graphs
  int kvcache_block_size = 256;          // any positive multiple of 16
  int num_kvcache_blocks = -1;           // -1: computed from the memory budget
  int64_t cpu_kvcache_bytes = 0;         // CPU KV budget in bytes; 0: cpu_kvcache_fraction of RAM
  float cpu_kvcache_fraction = 0.2f;
  std::string device = "auto";           // auto | cpu | cuda
  std::string policy = "prefill-first";  // prefill-first | mixed
  // fcfs | priority (vLLM's --scheduling-policy): with priority, waiting requests are admitted by
  // SamplingParams::priority (lower first, then arrival) and preemption takes the running
  // sequence with the highest priority value (the youngest among equals) instead of the youngest.
  std::string scheduling_policy = "fcfs";
  // auto | generate | embed. embed: every request is prefill-only and returns one pooled,
  // normalized vector (RequestOutput::embedding; models/pooling_config.h); auto picks embed
  // when the model folder has sentence-transformers pooling files.
  std::string task = "auto";
  bool enable_prefix_caching = true;
  int num_threads = 0;                   // CPU threads per rank; 0: cores / tensor_parallel_size
  // Weights quantized at load (CPU): auto | none | int8 | int4 (| int4-g32 | int4-g64 |
  // int4-g32-zp | int4-g64-zp); see src/kernels/quantized.h. auto: none for safetensors; for a
  // GGUF model the scheme its block types map to (engine/model_files.h).
  std::string quantization = "auto";
  // The LM head: auto (int8 when the layers are int4, else the layers' scheme; docs/perf.md
  // measures the choices) | none | any scheme above.
  std::string lm_head_quantization = "auto";
  // KV cache element type: auto (the backend's activation type: CPU f32, CUDA bf16) | f32 |
  // bf16 (CPU: half the attention bytes; docs/perf.md has its accuracy).
  std::string kv_cache_dtype = "auto";
  int max_waiting = 0;                   // server: bound on waiting requests; 0: unbounded
  bool allow_nonfinite_weights = false;  // load checkpoints holding NaN/Inf (else an error)
  std::string trace_path;                // Chrome trace JSON of steps and requests; "": off
  // With trace_path: also record each request's prompt token ids, resolved sampling parameters,
  // route and body (HTTP), and its output tokens, for `nanovllm replay` and `trace-view
  // --compare`. Off by default: prompts and outputs are user data.
  bool trace_requests = false;
  // Speculative decoding (src/spec): none | ngram (prompt lookup: drafts copied from the
  // sequence's own earlier text after a matching n-gram, verified by the target in one step) |
  // draft (a smaller model with the same tokenizer drafts greedily: draft_model).
  std::string speculative = "none";
  int num_speculative_tokens = 4;        // K: the most drafts verified per sequence and step
  int ngram_min = 1;                     // n-gram lengths tried, longest first
  int ngram_max = 4;
  // Speculate only while at most this many sequences decode (more: every sequence decodes one
  // token; docs/perf.md measures the crossover). 0: the default for the device.
  int speculative_max_batch = 0;
  // Verify K drafts whenever the proposer has them: no adaptive K, no timing (vLLM's behaviour;
  // benchmarks and tests that need a fixed step structure).
  bool speculative_fixed_k = false;
  // --speculative draft: the draft model's directory (same vocabulary and tokenizer as `model`,
  // fewer parameters). It runs on rank 0's device with its own KV cache from the same budget.
  std::string draft_model;
  // How the backend runs its kernels (threads' spinning, weight copy, kernel paths); defaults
  // from the NANOVLLM_* environment variables (backend_options.h).
  BackendOptions backend = backend_options_from_env();

  // Throws nanovllm::Error naming the field ("max_num_seqs must be >= 1, got 0") for an invalid
  // value. Looks at no machine state: engine/resolved_config.h settles `auto`.
  void validate() const;
};

inline constexpr std::string_view kDeviceChoices[] = {"auto", "cpu", "cuda"};
inline constexpr std::string_view kPolicyChoices[] = {"prefill-first", "mixed"};
inline constexpr std::string_view kSchedulingPolicyChoices[] = {"fcfs", "priority"};
inline constexpr std::string_view kTaskChoices[] = {"auto", "generate", "embed"};
// kernels/quantized.h: parse_quant_scheme() takes each of these.
inline constexpr std::string_view kQuantizationChoices[] = {
    "auto", "none", "int8", "int8-g32", "int4", "int4-g32", "int4-g64", "int4-g32-zp", "int4-g64-zp"};
// int6-g16-k / int5-g32-zp-k / int5-g32-zp / int3-g16-k / int2-g16-zp-k: a GGUF's Q6_K / Q5_K /
// Q5_1 / Q3_K / Q2_K LM head as stored (what auto picks for one; named here so that LLM::config()
// is a valid input; int5-g32-zp-f32, Q5_1's form until 2026-11-30, is still taken).
inline constexpr std::string_view kLmHeadQuantizationChoices[] = {
    "auto", "none", "int8", "int8-g32", "int4", "int4-g32", "int4-g64", "int4-g32-zp", "int4-g64-zp",
    "int6-g16-k", "int5-g32-zp-k", "int5-g32-zp", "int5-g32-zp-f32", "int3-g16-k", "int2-g16-zp-k"};
inline constexpr std::string_view kKvCacheDtypeChoices[] = {"auto", "f32", "bf16", "int8"};
inline constexpr std::string_view kSpeculativeChoices[] = {"none", "ngram", "draft"};

// The field table (nanovllm/field.h), in Python's keyword order (nano-vLLM's fields first).
// `model` has no flag here: each command adds its own --model.
constexpr auto fields_of(const Config*) {
  using C = Config;
  return std::tuple{
      field("model", &C::model, "", "Hugging Face model directory"),
      field("max_num_batched_tokens", &C::max_num_batched_tokens, "--max-num-batched-tokens",
            "token budget per step", rule::at_least<1>),
      field("max_num_seqs", &C::max_num_seqs, "--max-num-seqs", "max sequences per step",
            rule::at_least<1>),
      field("max_model_len", &C::max_model_len, "--max-model-len",
            "max tokens per sequence (clipped to the model)", rule::at_least<1>),
      field("gpu_memory_utilization", &C::gpu_memory_utilization, "--gpu-memory-utilization",
            "CUDA: fraction of the device memory the engine may use",
            rule::in_half_open<0, 1>),
      field("tensor_parallel_size", &C::tensor_parallel_size, "--tensor-parallel-size,--tp",
            "tensor-parallel ranks (processes; ranks 1..N-1 started on this machine unless "
            "--dist-init-addr is given)",
            rule::at_least<1>),
      field("dist_init_addr", &C::dist_init_addr, "--dist-init-addr",
            "HOST:PORT to serve the rendezvous on; ranks 1..N-1 are then started separately "
            "(`nanovllm worker --rank R --tensor-parallel-size N --dist-init-addr HOST:PORT`)"),
      field("worker_command", &C::worker_command, "",
            "argv prefix that starts a worker process (the CLI and Python set it)"),
      field("dist_timeout_s", &C::dist_timeout_s, "--dist-timeout",
            "seconds to wait for the ranks to join, and for any collective of a step",
            +[](const float& v) { return v > 0 ? std::string() : rule::got("> 0", v); }),
      field("enforce_eager", &C::enforce_eager, "--enforce-eager", "CUDA: no CUDA graphs"),
      field("kvcache_block_size", &C::kvcache_block_size, "--block-size",
            "KV cache block size (a multiple of 16)",
            +[](const int& v) {
              return v > 0 && v % 16 == 0 ? std::string()
                                          : rule::got("a positive multiple of 16", v);
            }),
      field("num_kvcache_blocks", &C::num_kvcache_blocks, "--num-kvcache-blocks",
            "KV cache blocks (-1: from the memory budget)",
            +[](const int& v) {
              return v == -1 || v >= 1 ? std::string() : rule::got("-1 (auto) or >= 1", v);
            }),
      field("cpu_kvcache_bytes", &C::cpu_kvcache_bytes, "--kv-cache-bytes",
            "CPU KV cache budget in bytes (0: cpu_kvcache_fraction of the available RAM)"),
      field("cpu_kvcache_fraction", &C::cpu_kvcache_fraction, "",
            "CPU KV cache budget as a fraction of the available RAM"),
      choice_field("device", &C::device, "--device", "auto | cpu | cuda", kDeviceChoices),
      choice_field("policy", &C::policy, "--policy", "scheduling policy: prefill-first | mixed",
                   kPolicyChoices),
      // No engine flag: requests carry priorities through the server (`serve --scheduling-policy`)
      // and the Python API; a batch from `generate` has none to order.
      choice_field("scheduling_policy", &C::scheduling_policy, "",
                   "request order: fcfs | priority (SamplingParams.priority, lower first; preempts the "
                   "highest value first)",
                   kSchedulingPolicyChoices),
      // No engine flag: `serve --task`, the Python API (LLM(task="embed"), llm.embed()).
      choice_field("task", &C::task, "", "auto | generate | embed (pooled embeddings, prefill only)",
                   kTaskChoices),
      field("enable_prefix_caching", &C::enable_prefix_caching, "--no-prefix-caching",
            "disable prefix caching"),
      field("num_threads", &C::num_threads, "--threads",
            "CPU threads per rank (0: the cores divided among the tensor-parallel ranks)",
            +[](const int& v) { return v >= 0 ? std::string() : rule::got(">= 0 (0: all cores)", v); }),
      field("max_waiting", &C::max_waiting, "",
            "server: bound on waiting requests (0: unbounded; `serve --max-waiting` sets it)",
            +[](const int& v) { return v >= 0 ? std::string() : rule::got(">= 0 (0: unbounded)", v); }),
      field("trace_path", &C::trace_path, "--trace",
            "write a Chrome trace (Perfetto, chrome://tracing, `nanovllm trace-view`) of every "
            "step and request to FILE"),
      field("trace_requests", &C::trace_requests, "--trace-requests",
            "with --trace: also record each request's prompt token ids, sampling parameters, "
            "HTTP route and body, and output tokens (user data), for `nanovllm replay`"),
      choice_field("speculative", &C::speculative, "--speculative",
                   "speculative decoding: none | ngram (prompt lookup: drafts from the "
                   "sequence's own earlier tokens, verified exactly by the model) | draft (a "
                   "smaller model drafts: --draft-model)",
                   kSpeculativeChoices),
      field("num_speculative_tokens", &C::num_speculative_tokens, "--num-speculative-tokens",
            "the most drafted tokens verified per sequence and step (1..16)",
            rule::in_closed<1, 16>),
      field("ngram_min", &C::ngram_min, "--ngram-min",
            "--speculative ngram: shortest n-gram matched (1..16)", rule::in_closed<1, 16>),
      field("ngram_max", &C::ngram_max, "--ngram-max",
            "--speculative ngram: longest n-gram matched, tried first (1..16, >= --ngram-min)",
            rule::in_closed<1, 16>),
      field("speculative_max_batch", &C::speculative_max_batch, "--speculative-max-batch",
            "speculate only while at most this many sequences decode (0: the device's default)",
            +[](const int& v) { return v >= 0 ? std::string() : rule::got(">= 0 (0: default)", v); }),
      field("speculative_fixed_k", &C::speculative_fixed_k, "--speculative-fixed-k",
            "verify K drafts whenever there are some (default: K adapts to each sequence's "
            "acceptance and the measured cost of a draft)"),
      field("draft_model", &C::draft_model, "--draft-model",
            "--speculative draft: the draft model's directory (same tokenizer and vocabulary, "
            "fewer parameters)"),
      choice_field("quantization", &C::quantization, "--quantization",
                   "weights quantized at load (CPU): auto (none; a GGUF file: the scheme its "
                   "block types map to) | none | int8 | int4 (int4-g32, int4-g64, int4-g32-zp, "
                   "int4-g64-zp)",
                   kQuantizationChoices),
      choice_field("lm_head_quantization", &C::lm_head_quantization, "--lm-head-quantization",
                   "LM head: auto (a GGUF's Q6_K / Q5_K / Q5_1 / Q3_K / Q2_K head as stored on the CPU; else int8 with "
                   "int4 layers, else as --quantization) | none | a --quantization value",
                   kLmHeadQuantizationChoices),
      choice_field("kv_cache_dtype", &C::kv_cache_dtype, "--kv-cache-dtype",
                   "KV cache type: auto (CPU f32, CUDA bf16) | f32 | bf16 | int8 (per token and head "
                   "scales; CPU)",
                   kKvCacheDtypeChoices),
      field("allow_nonfinite_weights", &C::allow_nonfinite_weights, "--allow-nonfinite-weights",
            "load a checkpoint even if a weight is NaN or Inf (default: error naming the tensor)"),
      field("backend", &C::backend, "", "how the backend runs its kernels (BackendOptions)"),
  };
}
static_assert(table_covers_struct<Config>(),
              "every Config member needs one row in fields_of(const Config*)");

}  // namespace nanovllm
