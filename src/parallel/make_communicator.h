// Picks the communicator of a backend: single rank (no process group or world 1), gloo on the
// CPU backend, NCCL on the CUDA backend.
#pragma once
#include <chrono>
#include <memory>

#include "parallel/communicator.h"

namespace nanovllm {

class Backend;
class ProcessGroup;

// Collective over `pg` (null: single rank). `timeout` bounds each collective of the forward.
std::unique_ptr<Communicator> make_communicator(ProcessGroup* pg, Backend& backend,
                                                std::chrono::milliseconds timeout);

}  // namespace nanovllm
