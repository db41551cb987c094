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

// device: "cpu" | "cuda" | "auto" (CUDA when a usable device is present, else CPU).
// num_threads: CPU threads (<= 0: all cores); ignored on CUDA. cuda_device: the GPU (one per
// tensor-parallel rank); ignored on the CPU. Throws nanovllm::Error naming the device when it
// is unknown or unavailable. options: how the backend runs its kernels (Config::backend); the
// backend keeps its own copy, so backends with different options can live in one process.
std::unique_ptr<Backend> make_backend(const std::string& device, int num_threads,
                                      int cuda_device = 0, const BackendOptions& options = {});

// Creates the CPU backend (num_threads <= 0: all cores).
std::unique_ptr<Backend> make_cpu_backend(int num_threads, const BackendOptions& options = {});
// Creates the CUDA backend on `device_id`; throws a clear error when CUDA is unavailable
// (not compiled in, no device, unsupported compute capability).
std::unique_ptr<Backend> make_cuda_backend(int device_id, const BackendOptions& options = {});
bool cuda_available();

}  // namespace nanovllm
