// Kernels and helpers of the CUDA microbenchmarks (see gpu_kernels.h).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>

#include "gpu_kernels.h"
#include "kernels/cuda/cuda_check.h"

namespace nanovllm::benchgpu {
namespace {

constexpr int kReadThreads = 512;

__global__ void read_pass_kernel(const uint4* __restrict__ p, int64_t n, uint32_t* sink) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  // Four independent 16-byte loads in flight per thread per iteration, coalesced across the warp.
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^
           d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    uint4 a = p[i];
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u && threadIdx.x == 0) sink[blockIdx.x] = acc;
}

__device__ inline uint32_t hash32(uint32_t x) {  // a 32-bit integer mix (lowbias32 family)
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = hash32(uint32_t(i) ^ hash32(seed + uint32_t(i >> 32)));
    float u = float(h >> 8) * (2.f / 16777216.f) - 1.f;  // [-1, 1)
    p[i] = __float2bfloat16(scale * u);
  }
}

}  // namespace

int read_pass_grid(int num_sms) { return 4 * num_sms; }

void launch_read_pass(const void* p, int64_t bytes, uint32_t* sink, int grid, cudaStream_t s) {
  read_pass_kernel<<<grid, kReadThreads, 0, s>>>(static_cast<const uint4*>(p), bytes / 16, sink);
  CUDA_CHECK_LAUNCH();
}

void launch_fill_bf16(void* p, int64_t n, uint32_t seed, float scale, cudaStream_t s) {
  fill_bf16_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed, scale);
  CUDA_CHECK_LAUNCH();
}

double median_ms(cudaStream_t s, int warmup, int reps, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms(size_t(std::max(reps, 1)));
  for (auto& m : ms) {
    CUDA_CHECK(cudaEventRecord(a, s));
    fn();
    CUDA_CHECK(cudaEventRecord(b, s));
    CUDA_CHECK(cudaEventSynchronize(b));
    CUDA_CHECK(cudaEventElapsedTime(&m, a, b));
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

DeviceFacts device_facts(int device) {
  DeviceFacts f;
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  f.name = prop.name;
  f.cc_major = prop.major;
  f.cc_minor = prop.minor;
  int sm = 0, clk_khz = 0, mem_khz = 0, bus = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, device));
  f.sm = sm;
  f.sm_clock_ghz = clk_khz * 1e-6;
  f.mem_clock_ghz = mem_khz * 1e-6;
  f.bus_bits = bus;
  f.spec_hbm_gbs = 2.0 * mem_khz * 1e3 * (bus / 8.0) / 1e9;
  // Dense BF16 (fp32 accumulate) datasheet figures; they assume the boost clock NVIDIA quotes,
  // below the maximum clock the device reports.
  struct Known { const char* key; double tflops; };
  const Known known[] = {{"H200", 989.4}, {"H100 NVL", 835.0}, {"H100 PCIe", 756.0},
                         {"H100", 989.4}, {"A100", 312.0}};
  for (const Known& k : known)
    if (std::strstr(prop.name, k.key)) {
      f.spec_bf16_tflops = k.tflops;
      f.peak_source = std::string("datasheet (") + k.key + ")";
      break;
    }
  if (f.spec_bf16_tflops == 0) {  // tensor-core FLOP per clock per SM, dense bf16
    int per_sm = prop.major == 9 ? 4096 : prop.major == 8 && prop.minor == 0 ? 2048 : 512;
    f.spec_bf16_tflops = double(sm) * f.sm_clock_ghz * 1e9 * per_sm / 1e12;
    f.peak_source = "SMs x max clock x " + std::to_string(per_sm) + " FLOP/clk/SM";
  }
  return f;
}

}  // namespace nanovllm::benchgpu
