// The random f32 Qwen3 tiny model the engine end-to-end tests share, made once per test binary
// run under the build folder.
#pragma once
#include <filesystem>
#include <string>

#include "testing/make_model.h"

namespace nanovllm {

// seed 7 is the shared one; another seed gives a model with the same shape, vocabulary and
// tokenizer and other weights (e.g. a draft model that disagrees with the target).
inline std::string random_tiny_model(uint64_t seed = 7) {
  const std::string d = std::string(NANOVLLM_BINARY_DIR) + "/test-models/qwen3-tiny-f32" +
                        (seed == 7 ? "" : "-seed" + std::to_string(seed));
  if (!std::filesystem::exists(d + "/config.json")) {
    MakeModelOptions o;
    o.arch = "qwen3";
    o.preset = "tiny";
    o.dtype = DType::F32;
    o.seed = seed;
    o.out_dir = d;
    make_random_model(o);
  }
  return d;
}

}  // namespace nanovllm
