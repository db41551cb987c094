// Kernels and timing helpers of the CUDA microbenchmarks (bench/gpu_*.cc): a read pass that
// measures the device-memory (HBM) read bandwidth, a pseudo-random fill, and event timing.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace nanovllm::benchgpu {

// Reads `bytes` (a multiple of 16) from `p` with 16-byte loads, four in flight per thread, over
// a grid of `grid` blocks of 512 threads; every loaded word feeds a per-thread XOR that is stored
// to sink[block] only if it equals an impossible value, so the loads cannot be dropped.
// sink needs `grid` uint32 slots.
void launch_read_pass(const void* p, int64_t bytes, uint32_t* sink, int grid, cudaStream_t s);
// Blocks for a full-chip read pass: 4 per SM times the SM count.
int read_pass_grid(int num_sms);

// p[i] = bf16(scale * u(seed, i)) with u uniform in [-1, 1) from an integer hash (no zeros
// pattern, different per seed).
void launch_fill_bf16(void* p, int64_t n, uint32_t seed, float scale, cudaStream_t s);

// Median milliseconds of `reps` runs of fn() on stream s (CUDA events), after `warmup` runs.
double median_ms(cudaStream_t s, int warmup, int reps, const std::function<void()>& fn);

// Device facts for the ratios: name, SMs, clocks, the bandwidth and dense BF16 tensor-core peak
// from the datasheet where the device is known, else from clocks x units (peak_source says which).
struct DeviceFacts {
  std::string name;
  int sm = 0, cc_major = 0, cc_minor = 0;
  double sm_clock_ghz = 0, mem_clock_ghz = 0;
  int bus_bits = 0;
  double spec_hbm_gbs = 0;        // 2 (DDR) x memory clock x bus width
  double spec_bf16_tflops = 0;    // dense, fp32 accumulate
  std::string peak_source;
};
DeviceFacts device_facts(int device);

}  // namespace nanovllm::benchgpu
