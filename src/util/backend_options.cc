// The one place the runtime reads its NANOVLLM_* environment variables (BackendOptions defaults).
#include "nanovllm/backend_options.h"

#include <cstdlib>

#include "util/check.h"

namespace nanovllm {

namespace {
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int env_int(const char* name, int fallback, int min) {
  const char* v = env(name);
  if (!v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  NV_CHECK(end && *end == 0 && x >= min && x <= 1 << 30, name, " must be an integer >= ", min,
           ", got '", v, "'");
  return int(x);
}

bool env_flag(const char* name, bool fallback) {
  const char* v = env(name);
  if (!v) return fallback;
  const std::string s = v;
  NV_CHECK(s == "0" || s == "1", name, " must be 0 or 1, got '", s, "'");
  return s == "1";
}
}  // namespace

void BackendOptions::validate() const {
  NV_CHECK(num_threads >= 0, "backend num_threads must be >= 0 (0: all cores), got ", num_threads);
  NV_CHECK(spin_us >= 0, "backend spin_us must be >= 0, got ", spin_us);
  const int lp = int(linear_path);
  NV_CHECK(lp >= 0 && lp <= 3, "backend linear_path must be 0..3 (auto, streaming, blas, onednn), got ",
           lp);
  NV_CHECK(isa.empty() || isa == "avxvnni" || isa == "avx2" || isa == "scalar",
           "ISA cap (NANOVLLM_ISA) must be avxvnni | avx2 | scalar, got '", isa, "'");
  NV_CHECK(cuda_prefill == "simple" || cuda_prefill == "tc",
           "CUDA prefill kernel (NANOVLLM_CUDA_PREFILL) must be 'simple' or 'tc', got '",
           cuda_prefill, "'");
  NV_CHECK(cuda_decode == "v1" || cuda_decode == "v2",
           "CUDA decode kernel (NANOVLLM_CUDA_DECODE) must be 'v1' or 'v2', got '", cuda_decode,
           "'");
}

BackendOptions backend_options_from_env() {
  BackendOptions o;
  o.num_threads = env_int("NANOVLLM_NUM_THREADS", o.num_threads, 0);
  o.spin_us = env_int("NANOVLLM_SPIN_US", o.spin_us, 0);
  o.adaptive_threads = env_flag("NANOVLLM_ADAPTIVE_THREADS", o.adaptive_threads);
  o.cpu_weight_copy = env_flag("NANOVLLM_CPU_WEIGHT_COPY", o.cpu_weight_copy);
  if (const char* v = env("NANOVLLM_ISA")) o.isa = v;
  if (const char* v = env("NANOVLLM_CUDA_PREFILL")) o.cuda_prefill = v;
  if (const char* v = env("NANOVLLM_CUDA_DECODE")) o.cuda_decode = v;
  o.validate();
  return o;
}

}  // namespace nanovllm
