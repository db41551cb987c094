// The CPU backend's communicator: host tensors over two gloo groups of one process group, the
// control group (host metadata; no busy polling, so idle workers sleep) and a data group for
// the per-layer collectives of the forward (busy polling when every rank has a core).
#pragma once
#include <memory>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/gloo_group.h"

namespace nanovllm {

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(GlooGroup& control, std::unique_ptr<GlooGroup> data);
  const char* name() const override { return "gloo"; }
  int rank() const override { return data_->rank(); }
  int world_size() const override { return data_->world(); }
  void all_reduce_sum(Tensor& t) override;  // F32 host tensors (the CPU act dtype)
  void gather_last_dim(const Tensor& part, Tensor* out, int root) override;
  void broadcast_bytes(void* data, size_t bytes, int root) override;
  int64_t all_reduce_min(int64_t value) override;
  void barrier() override;

 private:
  GlooGroup& control_;
  std::unique_ptr<GlooGroup> data_;
  std::vector<char> gathered_;  // [world, S, n] scratch of gather_last_dim
};

}  // namespace nanovllm
