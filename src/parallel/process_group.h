// A tensor-parallel process group: rank r of N, the rendezvous store, the control gloo group
// (host metadata), and on rank 0 the worker processes it started.
//
// Two ways to form one, on the same code:
//  - local (rank 0 has no address): rank 0 serves the store on 127.0.0.1:<free port> and starts
//    ranks 1..N-1 itself with `worker_command` (WorkerProcesses);
//  - separate launch (every rank has HOST:PORT): rank 0 serves the store there, ranks 1..N-1 are
//    started by hand or by a launcher on any machine (`nanovllm worker --rank R
//    --tensor-parallel-size N --dist-init-addr HOST:PORT`) and connect to it, as torchrun users
//    expect. Each rank listens for its peers on the interface it reaches the store through.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "parallel/gloo_group.h"

namespace nanovllm {

class TcpStore;
class TcpStoreServer;
class WorkerProcesses;

struct DistOptions {
  int rank = 0;
  int world = 1;
  // HOST:PORT of rank 0's store. Empty on rank 0: local start (127.0.0.1, a free port).
  std::string init_addr;
  // Rank 0, local start: the argv prefix of a worker process (rank, world, address appended).
  std::vector<std::string> worker_command;
  // Rendezvous, and any collective of the forward: a rank that does not answer in this time is
  // an error (a rank that exits is noticed at once through its closed connections).
  std::chrono::milliseconds timeout{120000};
  int watchdog_fd = -1;  // worker started by rank 0: exit when this pipe reaches EOF
};

class ProcessGroup {
 public:
  explicit ProcessGroup(const DistOptions& options);  // collective: returns when all N joined
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return options_.rank; }
  int world() const { return options_.world; }
  bool started_workers() const { return workers_ != nullptr; }
  GlooGroup& control() { return *control_; }
  // Another gloo group of the same ranks (collective; `name` unique per group).
  std::unique_ptr<GlooGroup> make_group(const std::string& name, bool busy_poll,
                                        std::chrono::milliseconds timeout);
  // Rank 0 with started workers: which ones exited and how ("" when none or not rank 0).
  std::string diagnose();
  // Rank 0: after the workers were told to stop, wait up to `grace`, then kill the rest.
  void shutdown_workers(std::chrono::milliseconds grace);
  std::vector<int> worker_pids() const;

 private:
  DistOptions options_;
  std::unique_ptr<TcpStoreServer> server_;  // rank 0
  std::unique_ptr<WorkerProcesses> workers_;  // rank 0, local start
  std::unique_ptr<TcpStore> store_;
  std::unique_ptr<GlooGroup> control_;
};

}  // namespace nanovllm
