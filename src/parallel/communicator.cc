#include "parallel/communicator.h"

#include <algorithm>
#include <cstring>

#include "util/check.h"

namespace nanovllm {

namespace {

class SingleRankCommunicator final : public Communicator {
 public:
  const char* name() const override { return "single"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_sum(Tensor&) override {}
  void gather_last_dim(const Tensor& part, Tensor* out, int root) override {
    NV_CHECK(root == 0 && out && out->device() == Device::CPU && part.device() == Device::CPU,
             "single-rank gather_last_dim: host tensors, root 0");
    NV_CHECK(part.ndim() == 2 && out->ndim() == 2 && part.size(0) == out->size(0) &&
                 out->size(1) <= part.size(1) && part.dtype() == out->dtype(),
             "gather_last_dim: part ", part.str(), " does not fit out ", out->str());
    scatter_gathered_columns(static_cast<const char*>(part.raw()), 1, part.size(0), part.size(1),
                             dtype_size(part.dtype()), static_cast<char*>(out->raw()),
                             out->size(1));
  }
  void broadcast_bytes(void*, size_t, int root) override {
    NV_CHECK(root == 0, "broadcast root ", root, " outside a world of 1");
  }
  int64_t all_reduce_min(int64_t v) override { return v; }
  void barrier() override {}
};

}  // namespace

std::unique_ptr<Communicator> make_single_rank_communicator() {
  return std::make_unique<SingleRankCommunicator>();
}

void scatter_gathered_columns(const char* gathered, int world, int64_t S, int64_t n,
                              size_t elem_size, char* out, int64_t N) {
  for (int r = 0; r < world; ++r) {
    const int64_t c0 = int64_t(r) * n, cols = std::min<int64_t>(n, N - c0);
    if (cols <= 0) break;
    const char* src = gathered + size_t(r) * size_t(S * n) * elem_size;
    for (int64_t s = 0; s < S; ++s)
      std::memcpy(out + size_t(s * N + c0) * elem_size, src + size_t(s * n) * elem_size,
                  size_t(cols) * elem_size);
  }
}

}  // namespace nanovllm
