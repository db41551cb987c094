#include "kernels/cpu/onednn_gemm.h"

#ifdef NANOVLLM_HAVE_DNNL
#include <dnnl.hpp>
#endif

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace nanovllm::cpu {

#ifdef NANOVLLM_HAVE_DNNL
namespace {

// Runs oneDNN with `n` OpenMP threads: it reads omp_get_max_threads() when it creates a
// primitive (the thread count is part of the plan) and when it runs it. The pool passes its
// active team size, so a core lost to another process is not waited on by the GEMMs either.
class OmpThreads {
 public:
  explicit OmpThreads(int n) {
#ifdef _OPENMP
    saved_ = omp_get_max_threads();
    omp_set_num_threads(n);
#endif
  }
  ~OmpThreads() {
#ifdef _OPENMP
    omp_set_num_threads(saved_);
#endif
  }

 private:
  int saved_ = 1;
};

// One primitive per (N, K, threads), with M a run-time dimension, created on first use.
struct Plan {
  dnnl::matmul prim;
  bool ok = false;
};

struct Context {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::mutex mu;
  std::map<std::tuple<int64_t, int64_t, int>, std::shared_ptr<Plan>> plans;
};

Context& ctx() {
  static Context c;
  return c;
}

std::shared_ptr<Plan> plan_for(int64_t N, int64_t K, int threads) {
  Context& c = ctx();
  std::lock_guard<std::mutex> lk(c.mu);
  auto& p = c.plans[{N, K, threads}];
  if (p) return p;
  p = std::make_shared<Plan>();
  OmpThreads omp(threads);
  try {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::memory::desc a({DNNL_RUNTIME_DIM_VAL, K}, dt::bf16, tag::ab);
    dnnl::memory::desc b({K, N}, dt::bf16, tag::ba);  // w [N, K] row-major is K x N in "ba"
    dnnl::memory::desc o({DNNL_RUNTIME_DIM_VAL, N}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, o), c.eng);
    p->prim = dnnl::matmul(pd);
    p->ok = true;
  } catch (const dnnl::error&) {
    p->ok = false;
  }
  return p;
}

}  // namespace

bool onednn_bf16_supported(int64_t N, int64_t K) { return plan_for(N, K, 1)->ok; }

bool onednn_bf16_linear(const Tensor& x, const Tensor& w, Tensor& out, ThreadPool& pool) {
  if (w.dtype() != DType::BF16) return false;
  const int64_t N = w.size(0), K = w.size(1), M = x.numel() / K;
  const int threads = pool.active_threads();
  auto plan = plan_for(N, K, threads);
  if (!plan->ok) return false;
  // x -> bf16 (round to nearest even), in parallel.
  std::vector<uint16_t> xb(size_t(M * K));
  const float* xp = x.data<float>();
  pool.parallel_for(M * K, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) xb[size_t(i)] = f32_to_bf16(xp[i]);
  }, 4096);
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  Context& c = ctx();
  dnnl::memory am({{M, K}, dt::bf16, tag::ab}, c.eng, xb.data());
  dnnl::memory bm({{K, N}, dt::bf16, tag::ba}, c.eng, w.raw());
  dnnl::memory om({{M, N}, dt::f32, tag::ab}, c.eng, out.raw());
  pool.park();  // oneDNN runs on its own OpenMP threads
  OmpThreads omp(threads);
  plan->prim.execute(c.strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, om}});
  c.strm.wait();
  return true;
}

#else
bool onednn_bf16_supported(int64_t, int64_t) { return false; }
bool onednn_bf16_linear(const Tensor&, const Tensor&, Tensor&, ThreadPool&) { return false; }
#endif

}  // namespace nanovllm::cpu
