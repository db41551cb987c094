#include "kernels/backend_factory.h"

#include "util/check.h"

namespace nanovllm {

std::unique_ptr<Backend> make_backend(const std::string& device, int num_threads, int cuda_device,
                                      const BackendOptions& options) {
  if (device == "cuda" || (device == "auto" && cuda_available()))
    return make_cuda_backend(cuda_device, options);
  if (device == "cpu" || device == "auto") return make_cpu_backend(num_threads, options);
  NV_THROW("unknown device '", device, "' (auto | cpu | cuda)");
}

// CUDA entry points when the CUDA backend is not compiled in: a clear error, never a crash.
#ifndef NANOVLLM_HAVE_CUDA
std::unique_ptr<Backend> make_cuda_backend(int, const BackendOptions&) {
  NV_THROW("this nanovllm was built without CUDA (configure with nvcc present and "
           "-DNANOVLLM_CUDA=ON); use --device cpu");
}
bool cuda_available() { return false; }
#endif

}  // namespace nanovllm
