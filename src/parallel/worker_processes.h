// Rank 0's worker processes on this machine (ranks 1..N-1), and the worker's side of their
// lifetime contract:
//  - each worker gets the read end of a pipe whose only write end rank 0 holds (O_CLOEXEC, so
//    no other exec'd child keeps it). When rank 0's process ends for any reason, SIGKILL
//    included, the kernel closes that end; the worker's watchdog thread reads EOF and _exits.
//    (PR_SET_PDEATHSIG is not used: it fires when the *thread* that forked exits, which kills
//    workers of an engine built on a short-lived thread.)
//  - a worker that exits is reaped here and described in rank 0's error messages (which rank,
//    which pid, exit code or signal); the engine's collectives see the closed sockets at once.
//  - on shutdown rank 0 waits a grace period for the workers to exit, then SIGKILLs them.
#pragma once
#include <chrono>
#include <string>
#include <sys/types.h>
#include <vector>

namespace nanovllm {

class WorkerProcesses {
 public:
  // Starts one process per rank in [1, world): argv = command + {"--rank", r,
  // "--tensor-parallel-size", world, "--dist-init-addr", addr, "--watchdog-fd", fd}.
  // Throws a clear error when the program cannot be started.
  WorkerProcesses(const std::vector<std::string>& command, int world, const std::string& addr);
  ~WorkerProcesses();  // terminate(0)
  WorkerProcesses(const WorkerProcesses&) = delete;
  WorkerProcesses& operator=(const WorkerProcesses&) = delete;

  // Reaps exited workers; returns "" when all run, else e.g. "worker rank 1 (pid 42) was killed
  // by signal 9 (Killed)". Waits up to `settle` for an exit that is in progress (a collective
  // can fail on the closed socket a moment before the process is reapable).
  std::string describe_exits(std::chrono::milliseconds settle = std::chrono::milliseconds(0));
  // Throws nanovllm::Error with describe_exits() when a worker has exited.
  void check_alive();
  // Waits up to `grace` for every worker to exit (after the shutdown message), then SIGKILLs
  // and reaps the rest. Idempotent.
  void terminate(std::chrono::milliseconds grace);
  std::vector<pid_t> pids() const;

 private:
  struct Worker {
    int rank = 0;
    pid_t pid = -1;
    int watchdog_write_fd = -1;
    bool exited = false;
    int status = 0;
  };
  bool reap(Worker& w, bool block);
  std::vector<Worker> workers_;
};

// Worker side: a detached thread that _exits the process with status 3 when `fd` reaches EOF
// (rank 0 is gone). No-op for fd < 0.
void start_parent_watchdog(int fd);

}  // namespace nanovllm
