// A real engine over a random tiny model (no tokenizer: prompts are token ids), shared by the
// server tests that need one. Created once per test binary, removed at exit.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "loader/make_model.h"
#include "nanovllm/llm.h"

namespace nanovllm::server::test_support {

class TinyLLM {
 public:
  static LLM& get() {
    static TinyLLM instance;
    return *instance.llm_;
  }

 private:
  TinyLLM() {
    namespace fs = std::filesystem;
    dir_ = fs::temp_directory_path() / ("nv_server_test_" + std::to_string(::getpid()));
    MakeModelOptions o;
    o.preset = "tiny";
    o.dtype = DType::F32;
    o.out_dir = dir_.string();
    o.threads = 2;
    make_random_model(o);
    Config c;
    c.model = dir_.string();
    c.num_threads = 2;
    c.max_model_len = 256;
    c.device = "cpu";
    llm_ = std::make_unique<LLM>(c);
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
