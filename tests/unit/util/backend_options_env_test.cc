// backend_options_from_env: the NANOVLLM_* variables are the defaults of BackendOptions, read in
// one place; malformed values are errors naming the variable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "nanovllm/backend_options.h"
#include "nanovllm/config.h"
#include "util/check.h"

using namespace nanovllm;

namespace {
const char* const kVars[] = {"NANOVLLM_NUM_THREADS", "NANOVLLM_SPIN_US",
                             "NANOVLLM_ADAPTIVE_THREADS", "NANOVLLM_CPU_WEIGHT_COPY",
                             "NANOVLLM_LINEAR_PATH", "NANOVLLM_ISA", "NANOVLLM_CUDA_PREFILL", "NANOVLLM_CUDA_DECODE",
                             "NANOVLLM_CUDA_GEMM"};

// Saves the variables, clears them, and restores them at the end of the test.
class EnvGuard {
 public:
  EnvGuard() {
    for (const char* v : kVars) {
      const char* s = std::getenv(v);
      saved_.emplace_back(s != nullptr, s ? s : "");
      unsetenv(v);
    }
  }
  ~EnvGuard() {
    for (size_t i = 0; i < saved_.size(); ++i) {
      if (saved_[i].first) setenv(kVars[i], saved_[i].second.c_str(), 1);
      else unsetenv(kVars[i]);
    }
  }

 private:
  std::vector<std::pair<bool, std::string>> saved_;
};

std::string error_of(const char* var, const char* value) {
  setenv(var, value, 1);
  std::string msg = "accepted";
  try {
    backend_options_from_env();
  } catch (const Error& e) {
    msg = e.what();
  }
  unsetenv(var);
  return msg;
}
}  // namespace

TEST(BackendOptionsEnv, UnsetGivesTheStructDefaults) {
  EnvGuard g;
  const BackendOptions e = backend_options_from_env(), d;
  EXPECT_EQ(e.num_threads, d.num_threads);
  EXPECT_EQ(e.spin_us, 2000);
  EXPECT_TRUE(e.adaptive_threads);
  EXPECT_TRUE(e.cpu_weight_copy);
  EXPECT_EQ(e.linear_path, LinearPath::kAuto);
  EXPECT_EQ(e.isa, IsaCap::kNone);
  EXPECT_EQ(e.cuda_prefill, CudaPrefill::kSimple);
  EXPECT_EQ(e.cuda_decode, CudaDecode::kV2);
  EXPECT_EQ(e.cuda_gemm, CudaGemm::kAuto);
}

TEST(BackendOptionsEnv, VariablesSetTheDefaultsOfConfig) {
  EnvGuard g;
  setenv("NANOVLLM_NUM_THREADS", "3", 1);
  setenv("NANOVLLM_SPIN_US", "0", 1);
  setenv("NANOVLLM_ADAPTIVE_THREADS", "0", 1);
  setenv("NANOVLLM_CPU_WEIGHT_COPY", "0", 1);
  setenv("NANOVLLM_LINEAR_PATH", "streaming", 1);
  setenv("NANOVLLM_ISA", "avx2", 1);
  setenv("NANOVLLM_CUDA_PREFILL", "tc", 1);
  setenv("NANOVLLM_CUDA_DECODE", "v1", 1);  // not the default (v2)
  setenv("NANOVLLM_CUDA_GEMM", "skinny", 1);
  const Config c;  // Config::backend's default comes from the environment
  EXPECT_EQ(c.backend.num_threads, 3);
  EXPECT_EQ(c.backend.spin_us, 0);
  EXPECT_FALSE(c.backend.adaptive_threads);
  EXPECT_FALSE(c.backend.cpu_weight_copy);
  EXPECT_EQ(c.backend.linear_path, LinearPath::kStreaming);
  EXPECT_EQ(c.backend.isa, IsaCap::kAvx2);
  EXPECT_EQ(c.backend.cuda_prefill, CudaPrefill::kTensorCore);
  EXPECT_EQ(c.backend.cuda_decode, CudaDecode::kV1);
  EXPECT_EQ(c.backend.cuda_gemm, CudaGemm::kSkinny);
}

TEST(BackendOptionsEnv, MalformedValuesNameTheVariable) {
  EnvGuard g;
  EXPECT_NE(error_of("NANOVLLM_NUM_THREADS", "four").find("NANOVLLM_NUM_THREADS must be an integer, got 'four'"),
            std::string::npos);
  EXPECT_NE(error_of("NANOVLLM_SPIN_US", "-5").find("NANOVLLM_SPIN_US must be >= 0, got -5"),
            std::string::npos);
  EXPECT_NE(error_of("NANOVLLM_CPU_WEIGHT_COPY", "no").find("NANOVLLM_CPU_WEIGHT_COPY must be 0 or 1"),
            std::string::npos);
  EXPECT_NE(error_of("NANOVLLM_LINEAR_PATH", "fast").find("NANOVLLM_LINEAR_PATH must be auto, streaming, blas or onednn, got 'fast'"),
            std::string::npos);
  EXPECT_NE(error_of("NANOVLLM_ISA", "avx9").find("NANOVLLM_ISA must be '', avxvnni, avx2 or scalar, got 'avx9'"),
            std::string::npos);
  EXPECT_NE(error_of("NANOVLLM_CUDA_PREFILL", "wmma").find("NANOVLLM_CUDA_PREFILL must be simple or tc, got 'wmma'"),
            std::string::npos);
  EXPECT_NE(error_of("NANOVLLM_CUDA_DECODE", "v3").find("NANOVLLM_CUDA_DECODE must be v1 or v2, got 'v3'"),
            std::string::npos);
  EXPECT_NE(error_of("NANOVLLM_CUDA_GEMM", "gemv").find("NANOVLLM_CUDA_GEMM must be cublas, skinny or auto, got 'gemv'"),
            std::string::npos);
  EXPECT_EQ(error_of("NANOVLLM_NUM_THREADS", "8"), "accepted");
}
