// The CPU linear layer by weight format on Qwen3-0.6B's MLP shape (gate_up: N = 6144,
// K = 1024, and down: N = 1024, K = 3072): bf16 (the default paths: streaming kernel below 16
// rows, oneDNN from 16) against int8 and the int4 variants, at M = 1, 4, 16, 64, 512.
// The formats run interleaved round by round (the machine's speed drifts), each shape gets the
// median of the rounds. Small M is reported as GB/s of weight bytes (bandwidth-bound), larger M
// as GFLOP/s (2 M N K per call). Weights are ~24 MB per format set, so they are read from DRAM
// (the L3 of a shared VM is not ours to count on).
// --cpu-time (with --threads 1): time the calling thread's CPU time instead of wall time, so a
// loaded machine's descheduling does not count (it still shares caches and the memory bus).
// int4-g32-zp-k, int5-g32-zp-k, int6-g16-k and int3-g16-k (the forms a GGUF's Q4_K, Q5_K, Q6_K and Q3_K keep) come from random codes and
// factors through prepare_linear_int4, as the loader hands them over; int5-g32-zp (a Q5_1's) and
// int5-g32-zp-f32 likewise from random codes, f16 d and m (q51_groups).
// --m 1,4,16,64,512 (the default): the activation rows per call; prefill's are up to
// max_num_batched_tokens (16,384), whose x8 no longer fits a core's L2.
// Usage: bench_qlinear [--rounds N] [--threads T] [--cpu-time] [--formats a,b,..] [--m a,b,..] [--json]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_factory.h"
#include "kernels/cpu/qgemm.h"
#include "util/tensor.h"

using namespace nanovllm;
using clk = std::chrono::steady_clock;

namespace {
// Random Q4_K- / Q5_K-shaped (bits 4 / 5: codes 0..15 / 0..31, per 32 columns scale d x sc and
// min -(dmin x m)) or
// Q6_K-shaped (bits 6: codes 0..63, zero 32, per 16 columns scale d x sc, sc signed) or Q3_K-shaped
// (bits 3: codes 0..7, zero 4, sc in [-32, 31]) groups with
// d / dmin per 256 columns (kernels/int4_groups.h), sized like a 0.02-scale weight.
Int4Groups k_quant_groups(int64_t N, int64_t K, int bits, std::mt19937& rng) {
  Int4Groups w;
  w.bits = bits;
  const bool sym = bits == 6 || bits == 3;  // Q6_K's / Q3_K's form: zero points, no mins
  const int gs = sym ? 16 : 32;
  w.N = N, w.K = K, w.G = K / gs;
  const int64_t S = K / 256;
  w.q = Tensor::empty({N, K}, DType::U8);
  w.scales = Tensor::empty({N, w.G}, DType::F32);
  w.g_idx = Tensor::empty({K}, DType::I32);
  for (int64_t k = 0; k < K; ++k) w.g_idx.data<int32_t>()[k] = int32_t(k / gs);
  w.d = Tensor::empty({N, S}, DType::F32);
  w.sub_scale = Tensor::empty({N, w.G}, DType::U8);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t i = 0; i < N * K; ++i) w.q.data<uint8_t>()[i] = uint8_t(byte(rng) & ((1 << bits) - 1));
  for (int64_t i = 0; i < N * S; ++i) w.d.data<float>()[i] = f16_to_f32(f32_to_f16(bits == 6 ? 6e-5f : bits == 3 ? 5e-4f : 2e-4f));
  if (sym) {
    w.zeros = Tensor::empty({N, w.G}, DType::U8);
    std::memset(w.zeros.raw(), bits == 3 ? 4 : 32, w.zeros.nbytes());
  } else {
    w.mins = Tensor::empty({N, w.G}, DType::F32);
    w.dmin = Tensor::empty({N, S}, DType::F32);
    w.sub_min = Tensor::empty({N, w.G}, DType::U8);
    for (int64_t i = 0; i < N * S; ++i) w.dmin.data<float>()[i] = f16_to_f32(f32_to_f16(2e-4f));
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < w.G; ++g) {
      const int64_t i = n * w.G + g;
      const float d = w.d.data<float>()[n * S + g * gs / 256];
      if (sym) {
        const int8_t sc = int8_t(bits == 3 ? byte(rng) % 64 - 32 : byte(rng) - 128);
        w.sub_scale.data<uint8_t>()[i] = uint8_t(sc);
        w.scales.data<float>()[i] = d * float(sc);
      } else {
        const uint8_t sc = uint8_t(byte(rng) & 63), m = uint8_t(byte(rng) & 63);
        w.sub_scale.data<uint8_t>()[i] = sc;
        w.sub_min.data<uint8_t>()[i] = m;
        w.scales.data<float>()[i] = d * float(sc);
        w.mins.data<float>()[i] = -(w.dmin.data<float>()[n * S + g / 8] * float(m));
      }
    }
  return w;
}

// Random Q5_1-shaped groups (codes 0..31, per 32 columns an f16 scale d and min m, no
// superblocks): int5-g32-zp; `f32`: every scale nudged off the f16 grid, so the same codes take
// int5-g32-zp-f32 (the form of Q5_K groups fused with Q5_1 ones).
Int4Groups q51_groups(int64_t N, int64_t K, bool f32, std::mt19937& rng) {
  Int4Groups w;
  w.bits = 5;
  w.N = N, w.K = K, w.G = K / 32;
  w.q = Tensor::empty({N, K}, DType::U8);
  w.scales = Tensor::empty({N, w.G}, DType::F32);
  w.mins = Tensor::empty({N, w.G}, DType::F32);
  w.g_idx = Tensor::empty({K}, DType::I32);
  for (int64_t k = 0; k < K; ++k) w.g_idx.data<int32_t>()[k] = int32_t(k / 32);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> du(1e-3f, 3e-3f), mu(-0.05f, 0.f);
  for (int64_t i = 0; i < N * K; ++i) w.q.data<uint8_t>()[i] = uint8_t(byte(rng) & 31);
  for (int64_t i = 0; i < N * w.G; ++i) {
    w.scales.data<float>()[i] = f16_to_f32(f32_to_f16(du(rng))) * (f32 ? 1.f + 0x1p-13f : 1.f);
    w.mins.data<float>()[i] = f16_to_f32(f32_to_f16(mu(rng)));
  }
  return w;
}
}  // namespace

int main(int argc, char** argv) {
  int rounds = 7, threads = 0;
  bool json = false, cpu_time = false;
  // int4-g32-zp-f32: the layout a GGUF's Q4_K repacks into when a tensor-parallel cut splits its
  // superblocks (f32 scale and min; here fitted from floats like int4-g32-zp, so only its bytes
  // and kernel differ).
  std::vector<std::string> formats = {"bf16", "int8", "int8-g32", "int4-g32", "int4-g64", "int4-g32-zp",
                                      "int4-g64-zp", "int4-g32-zp-f32", "int4-g32-zp-k", "int5-g32-zp-k",
                                      "int6-g16-k", "int3-g16-k", "int5-g32-zp", "int5-g32-zp-f32"};
  std::vector<int64_t> Ms = {1, 4, 16, 64, 512};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--m") && i + 1 < argc) {
      Ms.clear();
      for (std::string s = argv[++i]; !s.empty();) {
        const size_t c = s.find(',');
        const int64_t m = std::atoll(s.substr(0, c).c_str());
        if (m < 1 || m > (int64_t(1) << 16)) {
          std::fprintf(stderr, "error: --m takes row counts in [1, 65536], got '%s'\n", s.substr(0, c).c_str());
          return 2;
        }
        Ms.push_back(m);
        s = c == std::string::npos ? "" : s.substr(c + 1);
      }
    }
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--json")) json = true;
    else if (!std::strcmp(argv[i], "--cpu-time")) cpu_time = true;
    else if (!std::strcmp(argv[i], "--formats") && i + 1 < argc) {
      formats.clear();
      for (std::string s = argv[++i], f; !s.empty();) {
        const size_t c = s.find(',');
        formats.push_back(s.substr(0, c));
        s = c == std::string::npos ? "" : s.substr(c + 1);
      }
    } else {
      std::fprintf(stderr, "usage: bench_qlinear [--rounds N] [--threads T] [--cpu-time] [--formats a,b,..] [--m a,b,..] [--json]\n");
      return 2;
    }
  }
  if (cpu_time && threads != 1) {
    std::fprintf(stderr, "error: --cpu-time needs --threads 1 (it times the calling thread)\n");
    return 2;
  }
  auto now = [cpu_time] {
    if (!cpu_time) return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  };
  auto be = make_cpu_backend(threads);
  struct Shape { const char* name; int64_t N, K; };
  const std::vector<Shape> shapes = {{"gate_up", 6144, 1024}, {"down", 1024, 3072}};
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 0.02f);
  // Four copies of each weight, used in turn, so consecutive calls do not hit the same cache.
  constexpr int kCopies = 4;
  std::vector<std::vector<std::vector<LinearWeight>>> w(shapes.size());  // [shape][format][copy]
  for (size_t s = 0; s < shapes.size(); ++s) {
    for (const auto& f : formats) {
      std::vector<LinearWeight> copies;
      for (int c = 0; c < kCopies; ++c) {
        if (f == "int5-g32-zp" || f == "int5-g32-zp-f32") {
          copies.push_back(be->prepare_linear_int4(q51_groups(shapes[s].N, shapes[s].K, f == "int5-g32-zp-f32", rng)));
          continue;
        }
        if (f == "int4-g32-zp-k" || f == "int5-g32-zp-k" || f == "int6-g16-k" || f == "int3-g16-k") {
          const int bits = f == "int6-g16-k" ? 6 : f == "int3-g16-k" ? 3 : f == "int5-g32-zp-k" ? 5 : 4;
          copies.push_back(be->prepare_linear_int4(k_quant_groups(shapes[s].N, shapes[s].K, bits, rng)));
          continue;
        }
        Tensor host = Tensor::empty({shapes[s].N, shapes[s].K}, DType::BF16);
        std::vector<float> v(size_t(host.numel()));
        for (auto& x : v) x = nd(rng);
        convert_f32_to(v.data(), host.raw(), DType::BF16, host.numel());
        copies.push_back(be->prepare_linear(host, parse_quant_scheme(f == "bf16" ? "none" : f)));
      }
      w[s].push_back(copies);
    }
  }
  nlohmann::json out;
  out["threads"] = threads;
  out["cpu_time"] = cpu_time;
  out["quantized_isa"] = cpu::quantized_isa();
  if (!json) std::printf("quantized kernels: %s\n", cpu::quantized_isa());
  for (size_t s = 0; s < shapes.size(); ++s) {
    const auto& sh = shapes[s];
    for (int64_t M : Ms) {
      Tensor x = Tensor::empty({M, sh.K}, DType::F32), y = Tensor::empty({M, sh.N}, DType::F32);
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = nd(rng) * 50.f;
      // Calls per timing: about 40 MFLOP or 4 weight passes, whichever is more.
      const int calls = int(std::max<int64_t>(4, 40'000'000 / (2 * M * sh.N * sh.K)));
      std::vector<std::vector<double>> secs(formats.size());
      for (int r = 0; r < rounds; ++r)
        for (size_t f = 0; f < formats.size(); ++f) {
          be->linear(x, w[s][f][0], nullptr, y);  // warm (plans, buffers)
          const double t0 = now();
          for (int c = 0; c < calls; ++c) be->linear(x, w[s][f][size_t(c % kCopies)], nullptr, y);
          secs[f].push_back((now() - t0) / calls);
        }
      nlohmann::json row;
      if (!json) std::printf("%-8s M=%-4ld", sh.name, long(M));
      for (size_t f = 0; f < formats.size(); ++f) {
        std::sort(secs[f].begin(), secs[f].end());
        const double t = secs[f][secs[f].size() / 2];
        const double gflops = 2.0 * double(M) * sh.N * sh.K / t / 1e9;
        const double gbs = double(w[s][f][0].nbytes()) / t / 1e9;
        row[formats[f]] = {{"us", t * 1e6}, {"gflops", gflops}, {"weight_gb_s", gbs}};
        if (!json) {
          if (M <= 4) std::printf("  %s %5.1f GB/s", formats[f].c_str(), gbs);
          else std::printf("  %s %5.0f GF/s", formats[f].c_str(), gflops);
        }
      }
      if (!json) std::printf("\n");
      out[std::string(sh.name) + "_M" + std::to_string(M)] = row;
    }
  }
  if (json) std::printf("%s\n", out.dump().c_str());
  return 0;
}
