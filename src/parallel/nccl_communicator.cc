#include "parallel/nccl_communicator.h"

#if defined(NANOVLLM_HAVE_NCCL) && defined(NANOVLLM_HAVE_CUDA)
#include <nccl.h>

#include "parallel/gloo_group.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"

#define NCCL_CHECK(call)                                                                   \
  do {                                                                                     \
    ncclResult_t _nv_r = (call);                                                           \
    if (_nv_r != ncclSuccess)                                                              \
      ::nanovllm::detail::fail(__FILE__, __LINE__, "NCCL call failed: " #call, "NCCL error ", \
                               ncclGetErrorString(_nv_r), " (", ncclGetLastError(nullptr), \
                               ")");                                                       \
  } while (0)

namespace nanovllm {

namespace {

ncclDataType_t nccl_dtype(DType d) {
  switch (d) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
    default: NV_THROW("NCCL collectives take F32, BF16, F16 or I32 tensors, got ", dtype_name(d));
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(GlooGroup& control, cuda::CudaBackend& be) : control_(control), be_(be) {
    ncclUniqueId id{};
    if (control.rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    control.broadcast(&id, sizeof id, 0);
    CUDA_CHECK(cudaSetDevice(be.device_id()));
    NCCL_CHECK(ncclCommInitRank(&comm_, control.world(), id, control.rank()));
  }
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  const char* name() const override { return "nccl"; }
  int rank() const override { return control_.rank(); }
  int world_size() const override { return control_.world(); }

  void all_reduce_sum(Tensor& t) override {
    NV_CHECK(t.device() == Device::CUDA, "nccl all_reduce_sum takes device tensors, got ", t.str());
    NCCL_CHECK(ncclAllReduce(t.raw(), t.raw(), size_t(t.numel()), nccl_dtype(t.dtype()), ncclSum,
                             comm_, be_.stream()));
  }

  void gather_last_dim(const Tensor& part, Tensor* out, int root) override {
    NV_CHECK(part.device() == Device::CUDA && part.ndim() == 2,
             "nccl gather_last_dim takes a 2-D device tensor, got ", part.str());
    const int world = world_size();
    const int64_t S = part.size(0), n = part.size(1);
    // [world, S, n] on every rank (all-gather: NCCL has no gather), then rank r's [S, n] block
    // into columns of out [S, N] on the root with one strided copy per rank.
    Tensor gathered = be_.empty({int64_t(world), S, n}, part.dtype());
    NCCL_CHECK(ncclAllGather(part.raw(), gathered.raw(), size_t(part.numel()),
                             nccl_dtype(part.dtype()), comm_, be_.stream()));
    if (rank() != root) return;
    NV_CHECK(out && out->device() == Device::CUDA && out->dtype() == part.dtype() &&
                 out->ndim() == 2 && out->size(0) == S && out->size(1) <= n * world &&
                 out->size(1) > n * (world - 1),
             "gather_last_dim: out ", out ? out->str() : "null", " does not fit ", world,
             " parts ", part.str());
    const size_t es = dtype_size(part.dtype());
    const int64_t N = out->size(1);
    for (int r = 0; r < world; ++r) {
      const int64_t cols = std::min<int64_t>(n, N - int64_t(r) * n);
      if (cols <= 0 || S == 0) break;
      CUDA_CHECK(cudaMemcpy2DAsync(
          static_cast<char*>(out->raw()) + size_t(r) * size_t(n) * es, size_t(N) * es,
          static_cast<const char*>(gathered.raw()) + size_t(r) * size_t(S * n) * es,
          size_t(n) * es, size_t(cols) * es, size_t(S), cudaMemcpyDeviceToDevice, be_.stream()));
    }
  }

  void broadcast_bytes(void* data, size_t bytes, int root) override {
    control_.broadcast(data, bytes, root);
  }
  int64_t all_reduce_min(int64_t value) override {
    control_.all_reduce_min_i64(&value, 1);
    return value;
  }
  void barrier() override {
    be_.synchronize();
    control_.barrier();
  }

 private:
  GlooGroup& control_;
  cuda::CudaBackend& be_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(GlooGroup& control, Backend& backend) {
  auto* cb = dynamic_cast<cuda::CudaBackend*>(&backend);
  NV_CHECK(cb, "the NCCL communicator needs the CUDA backend, got ", backend.name());
  return std::make_unique<NcclCommunicator>(control, *cb);
}

}  // namespace nanovllm

#else  // built without NCCL (or without CUDA)

#include "kernels/backend.h"

namespace nanovllm {
std::unique_ptr<Communicator> make_nccl_communicator(GlooGroup&, Backend&) {
  NV_THROW("tensor parallelism on CUDA needs NCCL, and this nanovllm was built without it "
           "(configure with nccl.h and libnccl visible, e.g. -DNCCL_INC=<dir> -DNCCL_LIB=<file>)");
}
}  // namespace nanovllm

#endif
