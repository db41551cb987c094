#include "parallel/gloo_communicator.h"

#include <chrono>

#include "util/check.h"

namespace nanovllm {

namespace {
// Adds the wall time of its scope to a CommStats.
class Timed {
 public:
  Timed(CommStats& s, size_t bytes) : s_(s), t0_(std::chrono::steady_clock::now()) {
    s_.calls++;
    s_.bytes += int64_t(bytes);
  }
  ~Timed() {
    s_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  CommStats& s_;
  std::chrono::steady_clock::time_point t0_;
};
}  // namespace

GlooCommunicator::GlooCommunicator(GlooGroup& control, std::unique_ptr<GlooGroup> data)
    : control_(control), data_(std::move(data)) {
  NV_CHECK(data_ && data_->world() == control_.world() && data_->rank() == control_.rank(),
           "gloo communicator: control and data groups differ");
}

void GlooCommunicator::all_reduce_sum(Tensor& t) {
  NV_CHECK(t.device() == Device::CPU && t.dtype() == DType::F32,
           "gloo all_reduce_sum takes F32 host tensors, got ", t.str());
  Timed timed(data_stats_, t.nbytes());
  data_->all_reduce_sum_f32(t.data<float>(), size_t(t.numel()));
}

void GlooCommunicator::gather_last_dim(const Tensor& part, Tensor* out, int root) {
  NV_CHECK(part.device() == Device::CPU && part.ndim() == 2,
           "gloo gather_last_dim takes a 2-D host tensor, got ", part.str());
  NV_CHECK(root >= 0 && root < world_size(), "gather root ", root, " outside world ",
           world_size());
  const int64_t S = part.size(0), n = part.size(1);
  const size_t bytes = part.nbytes();
  Timed timed(data_stats_, bytes);
  gathered_.resize(bytes * size_t(world_size()));
  data_->all_gather(part.raw(), gathered_.data(), bytes);
  if (rank() != root) return;
  NV_CHECK(out && out->device() == Device::CPU && out->dtype() == part.dtype() &&
               out->ndim() == 2 && out->size(0) == S && out->size(1) <= n * world_size() &&
               out->size(1) > n * (world_size() - 1),
           "gather_last_dim: out ", out ? out->str() : "null", " does not fit ", world_size(),
           " parts ", part.str());
  scatter_gathered_columns(gathered_.data(), world_size(), S, n, dtype_size(part.dtype()),
                           static_cast<char*>(out->raw()), out->size(1));
}

void GlooCommunicator::broadcast_bytes(void* data, size_t bytes, int root) {
  Timed timed(control_stats_, bytes);
  control_.broadcast(data, bytes, root);
}

int64_t GlooCommunicator::all_reduce_min(int64_t value) {
  control_.all_reduce_min_i64(&value, 1);
  return value;
}

void GlooCommunicator::barrier() { control_.barrier(); }

}  // namespace nanovllm
