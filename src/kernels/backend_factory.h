// Making a Backend. The CPU backend is defined in kernels/cpu/cpu_backend.cc, the CUDA backend
// in kernels/cuda/cuda_backend.cc; backend_factory.cc picks one by device name and stands in for
// the CUDA entry points (a clear error) when CUDA is not compiled in. Its library, nv_backends,
// links both, so code that only runs ops (models, tests of one backend) needs neither.
#pragma once
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "nanovllm/backend_options.h"

namespace nanovllm {

// num_threads: CPU threads (<= 0: all cores); ignored on CUDA. cuda_device: the GPU (one per
// tensor-parallel rank); ignored on the CPU. Throws nanovllm::Error when the device is
// unavailable. options: how the backend runs its kernels (Config::backend); the backend keeps
// its own copy, so backends with different options can live in one process. (Config's "auto"
// device is settled before: engine/resolved_config.h.)
std::unique_ptr<Backend> make_backend(Device device, int num_threads, int cuda_device = 0,
                                      const BackendOptions& options = {});
// The activation type of the backend make_backend makes for `device` (CPU f32, CUDA bf16):
// the KV cache's type under kv_cache_dtype auto.
DType activation_dtype(Device device);

// Creates the CPU backend (num_threads <= 0: all cores).
std::unique_ptr<Backend> make_cpu_backend(int num_threads, const BackendOptions& options = {});
// Creates the CUDA backend on `device_id`; throws a clear error when CUDA is unavailable
// (not compiled in, no device, unsupported compute capability).
std::unique_ptr<Backend> make_cuda_backend(int device_id, const BackendOptions& options = {});
bool cuda_available();

}  // namespace nanovllm
