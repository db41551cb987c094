// CUDA entry points when the CUDA backend is not compiled in: a clear error, never a crash.
#include "kernels/backend.h"

#ifndef NANOVLLM_HAVE_CUDA
namespace nanovllm {
std::unique_ptr<Backend> make_cuda_backend(int) {
  NV_THROW("this nanovllm was built without CUDA (configure with nvcc present and "
           "-DNANOVLLM_CUDA=ON); use --device cpu");
}
bool cuda_available() { return false; }
}  // namespace nanovllm
#endif
