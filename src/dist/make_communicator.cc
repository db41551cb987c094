#include "dist/make_communicator.h"

#include <thread>

#include "dist/gloo_communicator.h"
#include "dist/nccl_communicator.h"
#include "dist/process_group.h"
#include "kernels/backend.h"

namespace nanovllm {

std::unique_ptr<Communicator> make_communicator(ProcessGroup* pg, Backend& backend,
                                                std::chrono::milliseconds timeout) {
  if (!pg || pg->world() == 1) return make_single_rank_communicator();
  if (backend.device() == Device::CUDA) return make_nccl_communicator(pg->control(), backend);
  // Spinning on the socket halves the all-reduce latency but burns the core it waits on: only
  // when every rank of this machine can have a core of its own (docs/perf.md).
  const bool busy_poll = unsigned(pg->world()) <= std::max(1u, std::thread::hardware_concurrency());
  return std::make_unique<GlooCommunicator>(pg->control(),
                                            pg->make_group("data", busy_poll, timeout));
}

}  // namespace nanovllm
