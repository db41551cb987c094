// `nanovllm worker`: one tensor-parallel rank > 0. Rank 0 (generate, bench, serve with
// --tensor-parallel-size N) starts these itself on its machine; with --dist-init-addr they are
// started separately, on any machine that reaches rank 0's address:
//   machine A:  nanovllm serve --model M --tensor-parallel-size 2 --dist-init-addr 10.0.0.1:29500
//   machine B:  nanovllm worker --rank 1 --tensor-parallel-size 2 --dist-init-addr 10.0.0.1:29500
// Everything else (model, device, cache sizes) comes from rank 0; the model directory must
// exist at the same path on every machine.
#include <CLI/CLI.hpp>

#include "command.h"
#include "engine/tp_worker.h"

namespace nanovllm::cli {

static int run_worker(int argc, char** argv) {
  CLI::App app{"Run one tensor-parallel rank > 0 (rank 0 is the engine: generate, bench, serve)"};
  DistOptions o;
  double timeout_s = 120;
  app.add_option("--rank", o.rank, "this rank, in [1, tensor-parallel-size)")->required();
  app.add_option("--tensor-parallel-size,--tp", o.world, "number of ranks")->required();
  app.add_option("--dist-init-addr", o.init_addr, "HOST:PORT of rank 0's rendezvous")->required();
  app.add_option("--dist-timeout", timeout_s, "seconds to wait for rank 0 to be reachable")
      ->capture_default_str();
  app.add_option("--watchdog-fd", o.watchdog_fd,
                 "set by rank 0 when it starts the worker: exit when this pipe closes");
  CLI11_PARSE(app, argc, argv);
  o.timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
  return run_tp_worker(o);
}

NANOVLLM_COMMAND("worker", "Run one tensor-parallel rank > 0 (started by rank 0, or by hand)",
                 run_worker);

}  // namespace nanovllm::cli
