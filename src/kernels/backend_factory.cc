#include "kernels/backend_factory.h"

#include "util/check.h"

namespace nanovllm {

std::unique_ptr<Backend> make_backend(Device device, int num_threads, int cuda_device,
                                      const BackendOptions& options) {
  if (device == Device::CUDA) return make_cuda_backend(cuda_device, options);
  return make_cpu_backend(num_threads, options);
}

DType activation_dtype(Device device) { return device == Device::CUDA ? DType::BF16 : DType::F32; }

// CUDA entry points when the CUDA backend is not compiled in: a clear error, never a crash.
#ifndef NANOVLLM_HAVE_CUDA
std::unique_ptr<Backend> make_cuda_backend(int, const BackendOptions&) {
  NV_THROW("this nanovllm was built without CUDA (configure with nvcc present and "
           "-DNANOVLLM_CUDA=ON); use --device cpu");
}
bool cuda_available() { return false; }
#endif

}  // namespace nanovllm
