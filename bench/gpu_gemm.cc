// BF16 GEMMs through the CUDA backend's linear (cuBLASLt) against the tensor-core peak.
//
//   bench_gpu_gemm [--json]
//
// out[M, N] = x[M, K] @ w[N, K]^T, bf16 inputs, fp32 accumulate, bf16 output (the LM head: f32
// logits). TFLOP/s = 2 M N K / time. Two references: the measured ceiling (the 8192^3 product,
// the largest rate cuBLASLt reaches on this device) and the datasheet dense-BF16 peak
// (gpu_kernels.cu: device_facts). Decode-sized products (M = 256) are bound by reading the
// weights, so they also report weight GB/s against the datasheet bandwidth. Weights rotate over
// enough copies to exceed the L2 cache (timings are from device memory, not L2). Each shape is
// checked on 64 sampled entries against a float64 dot product (max error / max |ref| <= 2e-2).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu_kernels.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "util/dtype.h"

using namespace nanovllm;
using namespace nanovllm::benchgpu;

namespace {

struct Shape3 {
  const char* name;
  int64_t M, N, K;
  DType out;
};

// Qwen3-0.6B (hidden 1024, 16 q / 8 kv heads of 128, intermediate 3072, vocab 151936) at a
// decode batch of 256 and a prefill chunk of 4096 tokens, after the ceiling.
const Shape3 kShapes[] = {
    {"square_8192", 8192, 8192, 8192, DType::BF16},
    {"qkv_proj_m4096", 4096, 4096, 1024, DType::BF16},
    {"o_proj_m4096", 4096, 1024, 2048, DType::BF16},
    {"gate_up_m4096", 4096, 6144, 1024, DType::BF16},
    {"down_m4096", 4096, 1024, 3072, DType::BF16},
    {"qkv_proj_m256", 256, 4096, 1024, DType::BF16},
    {"gate_up_m256", 256, 6144, 1024, DType::BF16},
    {"down_m256", 256, 1024, 3072, DType::BF16},
    {"lm_head_m256_f32", 256, 151936, 1024, DType::F32},
};

std::vector<float> host_f32(const void* p, DType dt, int64_t n) {
  std::vector<uint8_t> raw(size_t(n) * dtype_size(dt));
  CUDA_CHECK(cudaMemcpy(raw.data(), p, raw.size(), cudaMemcpyDeviceToHost));
  std::vector<float> f(static_cast<size_t>(n));
  convert_to_f32(raw.data(), dt, f.data(), n);
  return f;
}

// max |out - ref| / max |ref| over 64 sampled (m, n).
double sampled_error(cuda::CudaBackend& be, const Tensor& x, const Tensor& w, const Tensor& out,
                     const Shape3& s) {
  be.synchronize();
  std::mt19937 g(11);
  double max_err = 0, max_ref = 0;
  const size_t esz = dtype_size(s.out);
  for (int t = 0; t < 64; ++t) {
    const int64_t m = std::uniform_int_distribution<int64_t>(0, s.M - 1)(g);
    const int64_t n = std::uniform_int_distribution<int64_t>(0, s.N - 1)(g);
    auto xr = host_f32(static_cast<uint16_t*>(x.raw()) + m * s.K, DType::BF16, s.K);
    auto wr = host_f32(static_cast<uint16_t*>(w.raw()) + n * s.K, DType::BF16, s.K);
    auto o = host_f32(static_cast<uint8_t*>(out.raw()) + (m * s.N + n) * esz, s.out, 1);
    double ref = 0;
    for (int64_t k = 0; k < s.K; ++k) ref += double(xr[size_t(k)]) * wr[size_t(k)];
    if (!std::isfinite(o[0])) return INFINITY;
    max_err = std::max(max_err, std::abs(o[0] - ref));
    max_ref = std::max(max_ref, std::abs(ref));
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

// launches: products timed back to back between one pair of events (their mean is reported), as
// a decode step issues them; 1 for the large shapes.
nlohmann::json run_shape(cuda::CudaBackend& be, const Shape3& s, int l2_bytes, int launches = 1) {
  cudaStream_t st = be.stream();
  const int64_t w_bytes = s.N * s.K * 2;
  const int copies = int(std::clamp<int64_t>((4 * int64_t(l2_bytes) + w_bytes - 1) / w_bytes, 1, 16));
  Tensor x = be.empty({s.M, s.K}, DType::BF16);
  launch_fill_bf16(x.raw(), x.numel(), 21, 1.f, st);
  std::vector<Tensor> ws;
  for (int c = 0; c < copies; ++c) {
    ws.push_back(be.empty({s.N, s.K}, DType::BF16));
    launch_fill_bf16(ws.back().raw(), ws.back().numel(), 100 + uint32_t(c), 1.f, st);
  }
  Tensor out = be.empty({s.M, s.N}, s.out);
  CUDA_CHECK(cudaMemsetAsync(out.raw(), 0xff, out.nbytes(), st));  // NaN
  be.linear(x, ws[0], nullptr, out);
  const double err = sampled_error(be, x, ws[0], out, s);
  int next = 0;
  const double ms = median_ms(st, 3, 20, [&] {
    for (int i = 0; i < launches; ++i) {
      be.linear(x, ws[size_t(next)], nullptr, out);
      next = (next + 1) % copies;
    }
  }) / launches;
  const double flops = 2.0 * double(s.M) * s.N * s.K;
  return {{"name", s.name}, {"M", s.M}, {"N", s.N}, {"K", s.K},
          {"out", s.out == DType::F32 ? "f32" : "bf16"}, {"us", ms * 1e3},
          {"tflops", flops / ms / 1e9}, {"weight_gbs", double(w_bytes) / ms / 1e6},
          {"weight_copies", copies}, {"max_rel_err", err}, {"correct", err <= 2e-2}};
}

// Decode-sized products (the Qwen3-0.6B shapes at batch 1, 4 and 8): cuBLASLt against the
// skinny kernel (BackendOptions::cuda_gemm = skinny), weight GB/s vs the HBM spec.
const Shape3 kDecodeShapes[] = {
    {"qkv_proj", 1, 4096, 1024, DType::BF16}, {"o_proj", 1, 1024, 2048, DType::BF16},
    {"gate_up", 1, 6144, 1024, DType::BF16},  {"down", 1, 1024, 3072, DType::BF16},
    {"lm_head_f32", 1, 151936, 1024, DType::F32},
};

nlohmann::json decode_rows(cuda::CudaBackend& cublas, cuda::CudaBackend& skinny, int l2, double hbm,
                           bool print, bool& ok) {
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t M : {1, 4, 8})
    for (Shape3 s : kDecodeShapes) {
      s.M = M;
      nlohmann::json a = run_shape(cublas, s, l2, 28), b = run_shape(skinny, s, l2, 28);
      nlohmann::json r = {{"name", std::string(s.name) + "_m" + std::to_string(M)}, {"M", M},
                          {"N", s.N}, {"K", s.K}, {"cublas_us", a["us"]}, {"skinny_us", b["us"]},
                          {"cublas_weight_gbs", a["weight_gbs"]}, {"skinny_weight_gbs", b["weight_gbs"]},
                          {"skinny_speedup", a["us"].get<double>() / b["us"].get<double>()},
                          {"skinny_weight_ratio_vs_spec_hbm", b["weight_gbs"].get<double>() / hbm},
                          {"cublas_max_rel_err", a["max_rel_err"]}, {"skinny_max_rel_err", b["max_rel_err"]},
                          {"correct", a["correct"].get<bool>() && b["correct"].get<bool>()}};
      ok = ok && r["correct"].get<bool>();
      if (print)
        std::printf("decode %-16s M %lld: cublas %7.1f us (%5.0f GB/s), skinny %7.1f us (%5.0f GB/s) = "
                    "%.2fx; rel err %.1e / %.1e%s\n",
                    s.name, (long long)M, a["us"].get<double>(), a["weight_gbs"].get<double>(),
                    b["us"].get<double>(), b["weight_gbs"].get<double>(), r["skinny_speedup"].get<double>(),
                    a["max_rel_err"].get<double>(), b["max_rel_err"].get<double>(),
                    r["correct"].get<bool>() ? "" : "  WRONG");
      rows.push_back(r);
    }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = argc > 1 && std::string(argv[1]) == "--json";
  if (argc > 2 || (argc == 2 && !json)) {
    std::fprintf(stderr, "usage: %s [--json]\n", argv[0]);
    return 2;
  }
  try {
    if (!cuda_available()) { std::fprintf(stderr, "no CUDA device\n"); return 77; }
    // cuBLASLt for every shape: the default (cuda_gemm = auto) sends M = 1 to the skinny kernel,
    // which made the decode rows compare the skinny kernel with itself.
    BackendOptions cublas_only;
    cublas_only.cuda_gemm = CudaGemm::kCublas;
    cuda::CudaBackend be(0, cublas_only);
    const DeviceFacts f = device_facts(0);
    int l2 = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    nlohmann::json j = {{"device", f.name}, {"spec_bf16_tflops", f.spec_bf16_tflops},
                        {"peak_source", f.peak_source}, {"spec_hbm_gbs", f.spec_hbm_gbs},
                        {"sm_clock_ghz", f.sm_clock_ghz}, {"shapes", nlohmann::json::array()}};
    bool ok = true;
    double ceiling = 0;
    for (const Shape3& s : kShapes) {
      nlohmann::json r = run_shape(be, s, l2);
      if (ceiling == 0) ceiling = r["tflops"].get<double>();  // the first shape is the ceiling
      r["ratio_vs_ceiling"] = r["tflops"].get<double>() / ceiling;
      r["ratio_vs_spec_peak"] = r["tflops"].get<double>() / f.spec_bf16_tflops;
      r["weight_ratio_vs_spec_hbm"] = r["weight_gbs"].get<double>() / f.spec_hbm_gbs;
      ok = ok && r["correct"].get<bool>();
      if (!json)
        std::printf("%-18s M %5lld N %6lld K %5lld: %9.1f us %7.1f TFLOP/s (%.2f of ceiling, %.2f of "
                    "peak) weights %6.0f GB/s; rel err %.1e%s\n",
                    s.name, (long long)s.M, (long long)s.N, (long long)s.K, r["us"].get<double>(),
                    r["tflops"].get<double>(), r["ratio_vs_ceiling"].get<double>(),
                    r["ratio_vs_spec_peak"].get<double>(), r["weight_gbs"].get<double>(),
                    r["max_rel_err"].get<double>(), r["correct"].get<bool>() ? "" : "  WRONG");
      j["shapes"].push_back(r);
    }
    {
      BackendOptions o;
      o.cuda_gemm = CudaGemm::kSkinny;
      cuda::CudaBackend sk(0, o);
      j["decode"] = decode_rows(be, sk, l2, f.spec_hbm_gbs, !json, ok);
    }
    j["ceiling_tflops"] = ceiling;
    j["ceiling_ratio_vs_spec_peak"] = ceiling / f.spec_bf16_tflops;
    if (json) std::printf("%s\n", j.dump().c_str());
    else
      std::printf("%s: ceiling %.0f TFLOP/s = %.2f of the %s peak %.0f TFLOP/s\n", f.name.c_str(),
                  ceiling, ceiling / f.spec_bf16_tflops, f.peak_source.c_str(), f.spec_bf16_tflops);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu_gemm: %s\n", e.what());
    return 1;
  }
}
