#include "parallel/worker_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "util/check.h"

extern char** environ;

namespace nanovllm {

namespace {
// The fd number the watchdog pipe gets in the worker (dup2'd there, so not close-on-exec).
constexpr int kWatchdogFd = 200;
}  // namespace

WorkerProcesses::WorkerProcesses(const std::vector<std::string>& command, int world,
                                 const std::string& addr) {
  NV_CHECK(!command.empty(), "no worker command: tensor_parallel_size > 1 needs the program that "
           "runs ranks 1..N-1 (Config::worker_command, e.g. {\"/path/to/nanovllm\", \"worker\"})");
  NV_CHECK(::access(command[0].c_str(), X_OK) == 0, "worker program '", command[0],
           "' is not executable: ", std::strerror(errno));
  for (int r = 1; r < world; ++r) {
    int fds[2];
    NV_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "pipe(): ", std::strerror(errno));
    std::vector<std::string> args = command;
    for (const std::string& a : {std::string("--rank"), std::to_string(r),
                                 std::string("--tensor-parallel-size"), std::to_string(world),
                                 std::string("--dist-init-addr"), addr,
                                 std::string("--watchdog-fd"), std::to_string(kWatchdogFd)})
      args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[0], kWatchdogFd);  // clears close-on-exec
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    // Own process group: a terminal's Ctrl-C reaches rank 0 only, which then shuts the group
    // down in order (a worker killed by it first would turn that into an error).
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[0]);
    if (rc != 0) {
      ::close(fds[1]);
      terminate(std::chrono::milliseconds(0));
      NV_THROW("cannot start worker rank ", r, " ('", command[0], "'): ", std::strerror(rc));
    }
    workers_.push_back(Worker{r, pid, fds[1], false, 0});
  }
}

WorkerProcesses::~WorkerProcesses() { terminate(std::chrono::milliseconds(0)); }

bool WorkerProcesses::reap(Worker& w, bool block) {
  if (w.exited) return true;
  int status = 0;
  pid_t p;
  do {
    p = ::waitpid(w.pid, &status, block ? 0 : WNOHANG);
  } while (p < 0 && errno == EINTR);
  if (p == w.pid || (p < 0 && errno == ECHILD)) {
    w.exited = true;
    w.status = p == w.pid ? status : 0;
  }
  return w.exited;
}

std::string WorkerProcesses::describe_exits(std::chrono::milliseconds settle) {
  const auto deadline = std::chrono::steady_clock::now() + settle;
  std::ostringstream os;
  for (;;) {
    bool any = false;
    for (Worker& w : workers_) any |= reap(w, false);
    if (any || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (const Worker& w : workers_) {
    if (!w.exited) continue;
    if (os.tellp() > 0) os << "; ";
    os << "worker rank " << w.rank << " (pid " << w.pid << ")";
    if (WIFSIGNALED(w.status)) {
      os << " was killed by signal " << WTERMSIG(w.status) << " (" << strsignal(WTERMSIG(w.status))
         << ")";
    } else {
      os << " exited with status " << WEXITSTATUS(w.status);
    }
  }
  return os.str();
}

void WorkerProcesses::check_alive() {
  const std::string s = describe_exits();
  NV_CHECK(s.empty(), "tensor-parallel ", s, " (its stderr above may say why)");
}

void WorkerProcesses::terminate(std::chrono::milliseconds grace) {
  // Workers sent the shutdown message exit by themselves within the grace period; closing the
  // watchdog pipes then stops any that are still blocked (rank 0 gave up on them), and SIGKILL
  // the ones that do not react.
  auto wait_all = [this](std::chrono::milliseconds d) {
    const auto deadline = std::chrono::steady_clock::now() + d;
    for (;;) {
      bool all = true;
      for (Worker& w : workers_) all &= reap(w, false);
      if (all || std::chrono::steady_clock::now() >= deadline) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  wait_all(grace);
  for (Worker& w : workers_) {
    if (w.watchdog_write_fd >= 0) ::close(w.watchdog_write_fd);
    w.watchdog_write_fd = -1;
  }
  wait_all(std::chrono::milliseconds(500));
  for (Worker& w : workers_) {
    if (w.exited) continue;
    ::kill(w.pid, SIGKILL);
    reap(w, true);
  }
}

std::vector<pid_t> WorkerProcesses::pids() const {
  std::vector<pid_t> p;
  for (const Worker& w : workers_) p.push_back(w.pid);
  return p;
}

void start_parent_watchdog(int fd) {
  if (fd < 0) return;
  NV_CHECK(::fcntl(fd, F_GETFD) != -1, "--watchdog-fd ", fd, " is not an open file descriptor");
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  std::thread([fd] {
    char c;
    for (;;) {
      const ssize_t k = ::read(fd, &c, 1);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break;  // EOF: every write end is closed, rank 0 is gone
    }
    std::fprintf(stderr, "nanovllm worker: rank 0 exited or closed the group; stopping\n");
    std::_Exit(3);
  }).detach();
}

}  // namespace nanovllm
