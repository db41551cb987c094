// run_worker: a tensor-parallel rank > 0 in a Python process (nanovllm._worker, which LLM(...,
// tensor_parallel_size=N) starts N-1 times, or a user on another machine).
#include <chrono>

#include "bindings.h"
#include "engine/tp_worker.h"

namespace nanovllm::pyb {

void bind_worker(py::module_& m) {
  m.def(
      "run_worker",
      [](int rank, int world, const std::string& init_addr, int watchdog_fd, double timeout_s) {
        DistOptions o;
        o.rank = rank;
        o.world = world;
        o.init_addr = init_addr;
        o.watchdog_fd = watchdog_fd;
        o.timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
        py::gil_scoped_release release;
        return run_tp_worker(o);
      },
      py::arg("rank"), py::arg("tensor_parallel_size"), py::arg("dist_init_addr"),
      py::arg("watchdog_fd") = -1, py::arg("timeout_s") = 120.0,
      "Runs tensor-parallel rank `rank` (>= 1) until rank 0 shuts the group down; returns 0.");
}

}  // namespace nanovllm::pyb
