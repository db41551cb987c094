// The random f32 Qwen3 tiny model the engine end-to-end tests share, made once per test binary
// run under the build folder.
#pragma once
#include <filesystem>
#include <string>

#include "testing/make_model.h"

namespace nanovllm {

inline const std::string& random_tiny_model() {
  static std::string dir = [] {
    std::string d = std::string(NANOVLLM_BINARY_DIR) + "/test-models/qwen3-tiny-f32";
    if (!std::filesystem::exists(d + "/config.json")) {
      MakeModelOptions o;
      o.arch = "qwen3";
      o.preset = "tiny";
      o.dtype = DType::F32;
      o.seed = 7;
      o.out_dir = d;
      make_random_model(o);
    }
    return d;
  }();
  return dir;
}

}  // namespace nanovllm
