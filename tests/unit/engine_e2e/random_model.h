// The random f32 Qwen3 tiny model the engine end-to-end tests share, made once under the build
// folder. ctest runs test_engine_e2e as several processes at once (tests/CMakeLists.txt), so the
// model is written to a folder of this process and renamed into place: a reader never sees half
// a model, and when two processes make it, one rename wins and the other copy is dropped.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "testing/make_model.h"

namespace nanovllm {

// seed 7 is the shared one; another seed gives a model with the same shape, vocabulary and
// tokenizer and other weights (e.g. a draft model that disagrees with the target).
inline std::string random_tiny_model(uint64_t seed = 7) {
  const std::string d = std::string(NANOVLLM_BINARY_DIR) + "/test-models/qwen3-tiny-f32" +
                        (seed == 7 ? "" : "-seed" + std::to_string(seed));
  if (!std::filesystem::exists(d + "/config.json")) {
    const std::string tmp = d + ".tmp" + std::to_string(::getpid());
    std::filesystem::remove_all(tmp);
    MakeModelOptions o;
    o.arch = "qwen3";
    o.preset = "tiny";
    o.dtype = DType::F32;
    o.seed = seed;
    o.out_dir = tmp;
    make_random_model(o);
    std::error_code ec;
    std::filesystem::rename(tmp, d, ec);  // fails when another process's copy is there already
    if (ec && !std::filesystem::exists(d + "/config.json")) {
      std::filesystem::remove_all(d);  // a partial model left by an interrupted older run
      std::filesystem::rename(tmp, d, ec);
    }
    if (ec) std::filesystem::remove_all(tmp);
  }
  return d;
}

}  // namespace nanovllm
