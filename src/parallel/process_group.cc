#include "parallel/process_group.h"

#include "parallel/tcp_store.h"
#include "parallel/worker_processes.h"

#include "util/check.h"

namespace nanovllm {

namespace {
// The control group carries the per-step metadata: a worker waits on it for as long as rank 0
// is idle (a server with no requests), so its reads never time out. Rank 0 being gone is seen
// through the closed connection and the watchdog pipe instead.
constexpr std::chrono::milliseconds kNoTimeout = std::chrono::hours(24 * 365);
}  // namespace

ProcessGroup::ProcessGroup(const DistOptions& o) : options_(o) {
  NV_CHECK(o.world >= 1, "tensor_parallel_size must be >= 1, got ", o.world);
  NV_CHECK(o.rank >= 0 && o.rank < o.world, "rank ", o.rank, " is outside [0, ", o.world,
           ") (tensor_parallel_size ", o.world, ")");
  NV_CHECK(o.rank == 0 || !o.init_addr.empty(), "rank ", o.rank,
           " needs --dist-init-addr HOST:PORT (rank 0's rendezvous address)");
  std::string host = "127.0.0.1";
  int port = 0;
  if (!o.init_addr.empty()) std::tie(host, port) = parse_host_port(o.init_addr);
  NV_CHECK(o.rank == 0 || port != 0, "rank ", o.rank, ": --dist-init-addr '", o.init_addr,
           "' needs rank 0's port, not 0");
  if (o.rank == 0) {
    server_ = std::make_unique<TcpStoreServer>(host, port);
    port = server_->port();
    if (o.init_addr.empty() && o.world > 1)
      workers_ = std::make_unique<WorkerProcesses>(o.worker_command, o.world,
                                                   host + ":" + std::to_string(port));
  }
  start_parent_watchdog(o.watchdog_fd);
  // Rank 0 notices a worker that died before joining instead of waiting out the timeout.
  std::function<void()> abort_check;
  if (workers_) abort_check = [this] { workers_->check_alive(); };
  store_ = std::make_unique<TcpStore>(host, port, o.timeout, abort_check);
  GlooGroupOptions go;
  go.prefix = "control";
  go.listen_ip = store_->local_ip();
  go.timeout = kNoTimeout;
  go.diagnose = [this] { return diagnose(); };
  control_ = std::make_unique<GlooGroup>(*store_, o.rank, o.world, go);
}

ProcessGroup::~ProcessGroup() {
  control_.reset();  // closes the connections first: blocked peers see EOF
  if (workers_) workers_->terminate(std::chrono::milliseconds(0));
}

std::unique_ptr<GlooGroup> ProcessGroup::make_group(const std::string& name, bool busy_poll,
                                                    std::chrono::milliseconds timeout) {
  GlooGroupOptions go;
  go.prefix = name;
  go.listen_ip = store_->local_ip();
  go.timeout = timeout;
  go.busy_poll = busy_poll;
  go.diagnose = [this] { return diagnose(); };
  return std::make_unique<GlooGroup>(*store_, options_.rank, options_.world, go);
}

std::string ProcessGroup::diagnose() {
  if (!workers_) return "";
  return workers_->describe_exits(std::chrono::milliseconds(300));
}

void ProcessGroup::shutdown_workers(std::chrono::milliseconds grace) {
  if (workers_) workers_->terminate(grace);
}

std::vector<int> ProcessGroup::worker_pids() const {
  std::vector<int> p;
  if (workers_)
    for (pid_t x : workers_->pids()) p.push_back(int(x));
  return p;
}

}  // namespace nanovllm
