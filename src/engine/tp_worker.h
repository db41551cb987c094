// A tensor-parallel rank > 0: joins rank 0's group, receives its configuration, loads its shard
// of the model and KV cache, then runs every step rank 0 broadcasts until rank 0 shuts the
// group down (or goes away: the worker then exits through a failed collective or its watchdog).
// `nanovllm worker` and the Python package's worker entry call it.
#pragma once
#include "parallel/process_group.h"

namespace nanovllm {

// Returns the process exit code (0 after a clean shutdown); throws nanovllm::Error on failure.
int run_tp_worker(const DistOptions& options);

}  // namespace nanovllm
