// CUDA-specific checks outside the conformance table (which has every op, in
// conformance_gpu_test.cc): creating a backend on a device that does not exist is a clear error.
#include "gpu_test_util.h"

namespace nanovllm::gputest {
namespace {

TEST(GpuDevice, BadDeviceIsAClearError) {
  NV_NEED_GPU();
  EXPECT_THROW(make_cuda_backend(4096), Error);
}

}  // namespace
}  // namespace nanovllm::gputest
