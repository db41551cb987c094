// Hardware ceilings on this machine, and the CPU linear layer against them:
//  1. memory read bandwidth (STREAM-like: every thread sums its slice of a 1 GiB buffer held in
//     transparent huge pages, AVX-512 loads when present; best of 5 passes);
//  2. arithmetic ceilings (compute_peak.h): f32 FMA and int8 dot issue rates of all threads;
//     peak GEMM GFLOP/s: OpenBLAS sgemm, oneDNN f32 matmul, oneDNN bf16 matmul (when supported);
//  3. nanovllm's linear on Qwen3-0.6B shapes: decode (M = 1, bf16 weights) as GB/s of weights,
//     prefill (M = 512) as GFLOP/s.
// Usage: bench_hw_limits [--json]. Prints one JSON object with --json.
#include <cblas.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#ifdef NANOVLLM_HAVE_DNNL
#include <dnnl.hpp>
#endif

#include "nanovllm/backend_options.h"
#include "kernels/cpu/bf16_dot_probe.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/simd.h"
#include "compute_peak.h"
#include "read_pass.h"
#include "util/cpu_features.h"
#include "util/tensor.h"
#include "util/thread_pool.h"

using namespace nanovllm;
using clk = std::chrono::steady_clock;

template <class F>
double best_seconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = clk::now();
    f();
    best = std::min(best, std::chrono::duration<double>(clk::now() - t0).count());
  }
  return best;
}

int main(int argc, char** argv) {
  bool json = argc > 1 && !std::strcmp(argv[1], "--json");
  ThreadPool pool(backend_options_from_env().num_threads);  // NANOVLLM_NUM_THREADS or all cores
  nlohmann::json out;
  out["threads"] = pool.size();
  out["cpu_isa"] = cpu_features().summary();
  // What decides oneDNN vs the streaming kernel for BF16 weights at M >= 16 (gemm.cc).
  const cpu::Bf16DotProbe& probe = cpu::bf16_dot_probe();
  out["fma_f32_macs_per_ns_1thread"] = probe.fma_macs_per_ns;
  out["dpbf16_macs_per_ns_1thread"] = probe.dpbf16_macs_per_ns;
  out["bf16_dot_speedup"] = probe.speedup();
  out["bf16_linear_large_m"] = probe.bf16_matmul_wins() ? "onednn" : "streaming";

  // 1. Read bandwidth.
  const int64_t n = (int64_t(1) << 30) / 4;
  void* map = mmap(nullptr, size_t(n) * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    std::fprintf(stderr, "error: cannot map the 1 GiB read buffer\n");
    return 1;
  }
  madvise(map, size_t(n) * 4, MADV_HUGEPAGE);
  float* buf = static_cast<float*>(map);
  pool.parallel_for(n, [&](int64_t a, int64_t b) { std::fill(buf + a, buf + b, 1.f); }, 1 << 16);
  std::vector<float> sink(size_t(pool.size()));
  double t = best_seconds(5, [&] {
    pool.parallel_for(n, [&](int64_t a, int64_t b) {
      sink[size_t(a * pool.size() / n)] += bench::read_sum(buf + a, b - a);
    }, 1 << 16);
  });
  out["read_bandwidth_gb_s"] = double(n) * 4 / t / 1e9;
  munmap(map, size_t(n) * 4);

  // 2. Arithmetic ceilings, then peak GEMM (square, 2048).
  const bench::ComputePeak peak = bench::measure_compute_peak(pool);
  out["f32_fma_peak_gflops"] = peak.f32_gflops;
  out["f32_fma_isa"] = peak.f32_isa;
  out["int8_dot_peak_gops"] = peak.int8_gops;
  out["int8_dot_isa"] = peak.int8_isa;
  const int S = 2048;
  std::vector<float> A(size_t(S) * S), B(size_t(S) * S), C(size_t(S) * S);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& x : A) x = nd(rng);
  for (auto& x : B) x = nd(rng);
  t = best_seconds(3, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, S, 1.f, A.data(), S, B.data(), S,
                0.f, C.data(), S);
  });
  out["openblas_sgemm_gflops"] = 2.0 * S * S * S / t / 1e9;
#ifdef NANOVLLM_HAVE_DNNL
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  for (auto dt : {memory::data_type::f32, memory::data_type::bf16}) {
    try {
      memory::desc a_md({S, S}, dt, memory::format_tag::ab);
      memory::desc b_md({S, S}, dt, memory::format_tag::ba);  // weights [N, K] row-major = K x N "ba"
      memory::desc c_md({S, S}, memory::data_type::f32, memory::format_tag::ab);
      matmul::primitive_desc pd(matmul::desc(a_md, b_md, c_md), eng);
      matmul prim(pd);
      memory am(a_md, eng), bm(b_md, eng), cm(c_md, eng);
      if (dt == memory::data_type::f32) {
        std::memcpy(am.get_data_handle(), A.data(), A.size() * 4);
        std::memcpy(bm.get_data_handle(), B.data(), B.size() * 4);
      } else {
        convert_f32_to(A.data(), am.get_data_handle(), DType::BF16, int64_t(A.size()));
        convert_f32_to(B.data(), bm.get_data_handle(), DType::BF16, int64_t(B.size()));
      }
      t = best_seconds(3, [&] {
        prim.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        strm.wait();
      });
      out[dt == memory::data_type::f32 ? "onednn_f32_gflops" : "onednn_bf16_gflops"] =
          2.0 * S * S * S / t / 1e9;
    } catch (const dnnl::error& e) {
      out[dt == memory::data_type::f32 ? "onednn_f32_gflops" : "onednn_bf16_gflops"] =
          std::string("unsupported: ") + e.what();
    }
  }
#endif

  // 3. nanovllm linear on Qwen3-0.6B MLP shapes (gate_up: N = 6144, K = 1024).
  const int64_t N = 6144, K = 1024;
  Tensor w = Tensor::empty({N, K}, DType::BF16);
  for (int64_t i = 0; i < N * K; ++i) w.data<uint16_t>()[i] = f32_to_bf16(nd(rng) * 0.05f);
  // path 1 = streaming kernel, 2 = OpenBLAS (bf16 panels converted to f32), 3 = oneDNN bf16.
  for (int M : {1, 4, 16, 32, 64, 128, 512}) {
    Tensor x = Tensor::empty({M, K}, DType::F32), y = Tensor::empty({M, N}, DType::F32);
    for (int64_t i = 0; i < M * K; ++i) x.data<float>()[i] = nd(rng);
    int reps = M >= 128 ? 3 : 20;
    for (int path : {1, 2, 3}) {
      if (path == 3 && M < 16) continue;
      t = best_seconds(reps, [&] { cpu::linear(x, w, nullptr, y, pool, LinearPath(path)); });
      std::string key = std::string(path == 1 ? "stream" : path == 2 ? "blas" : "onednn") + "_bf16_m" + std::to_string(M);
      out[key + "_weight_gb_s"] = double(N * K * 2) / t / 1e9;
      out[key + "_gflops"] = 2.0 * M * N * K / t / 1e9;
    }
  }
  if (json) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("%s\n", out.dump(2).c_str());
  }
  return 0;
}
