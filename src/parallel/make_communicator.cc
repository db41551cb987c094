#include "parallel/make_communicator.h"


#include "parallel/gloo_communicator.h"
#include "parallel/nccl_communicator.h"
#include "parallel/process_group.h"
#include "kernels/backend.h"

namespace nanovllm {

std::unique_ptr<Communicator> make_communicator(ProcessGroup* pg, Backend& backend,
                                                std::chrono::milliseconds timeout) {
  if (!pg || pg->world() == 1) return make_single_rank_communicator();
  if (backend.device() == Device::CUDA) return make_nccl_communicator(pg->control(), backend);
  // No busy polling: it halves an idle machine's all-reduce latency (10 vs 18 us) but a rank
  // that spins holds its core while its peer waits for one, and on a shared machine decode
  // ran 7.6x slower with it (docs/perf.md, "Communicators").
  return std::make_unique<GlooCommunicator>(pg->control(),
                                            pg->make_group("data", /*busy_poll=*/false, timeout));
}

}  // namespace nanovllm
