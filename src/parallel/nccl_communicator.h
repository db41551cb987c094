// The CUDA backend's communicator: NCCL on the backend's stream for the tensor collectives
// (so they are captured into CUDA graphs with the rest of the forward), the process group's
// gloo control group for host metadata. Built only when NCCL is found (NANOVLLM_HAVE_NCCL).
// One GPU per rank: rank r of a local start uses device r.
#pragma once
#include <memory>

#include "parallel/communicator.h"

namespace nanovllm {

class Backend;
class GlooGroup;

// Makes the NCCL communicator for `backend` (a CudaBackend): rank 0 creates the NCCL unique
// id and broadcasts it over `control` (collective).
std::unique_ptr<Communicator> make_nccl_communicator(GlooGroup& control, Backend& backend);

}  // namespace nanovllm
