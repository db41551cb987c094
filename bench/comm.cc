// bench_comm: all-reduce latency at decode sizes (hidden 1024 floats x batch 1..64) between
// processes on this machine, for the gloo variants nanovllm could use, and the cost of the
// per-step metadata broadcast (StepChannel::kInline bytes). Forks its ranks; each forms its
// group through the TCP store like the engine does. Not a test (docs/perf.md, "Communicators").
//
//   bench_comm [--world 2] [--iters 2000] [--json]
//
// Variants: gloo-loop (pairs served by gloo's event-loop thread, the library's default),
// gloo-sync (the calling thread reads its socket: what the engine uses), gloo-sync-busypoll
// (spins on the socket). Open MPI, measured for the choice, is bench/mpi/allreduce_mpi.cc.
#include <gloo/allreduce_ring.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "parallel/tcp_store.h"
#include "engine/step_channel.h"

using namespace nanovllm;

namespace {

struct Row {
  std::string variant, op;
  size_t floats = 0;
  double p10 = 0, p50 = 0, p90 = 0;
};

template <class Fn>
Row measure(const std::string& variant, const std::string& op, size_t floats, int iters, Fn&& fn) {
  std::vector<double> us;
  for (int i = 0; i < iters + iters / 10; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    if (i >= iters / 10)  // warm-up excluded
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return {variant, op, floats, us[us.size() / 10], us[us.size() / 2], us[us.size() * 9 / 10]};
}

std::vector<Row> run_rank(int rank, int world, int port, int iters) {
  TcpStore store("127.0.0.1", port, std::chrono::seconds(30));
  std::vector<Row> rows;
  const char* names[] = {"gloo-loop", "gloo-sync", "gloo-sync-busypoll"};
  for (int mode = 0; mode < 3; ++mode) {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    attr.ai_family = AF_INET;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
    gloo::rendezvous::PrefixStore ps(names[mode], store);
    ctx->connectFullMesh(ps, dev);
    if (mode > 0)
      for (int i = 0; i < world; ++i)
        if (i != rank) ctx->getPair(i)->setSync(true, mode == 2);
    for (size_t batch : {1, 4, 16, 64}) {
      const size_t n = 1024 * batch;
      std::vector<float> buf(n, 1.f);
      std::vector<float*> ptrs{buf.data()};
      // Constructed per call, as the engine does (its activations move between steps).
      rows.push_back(measure(names[mode], "all_reduce", n, iters, [&] {
        gloo::AllreduceRing<float>(ctx, ptrs, int(n)).run();
      }));
    }
    std::vector<char> msg(StepChannel::kInline);
    std::vector<char*> mp{msg.data()};
    rows.push_back(measure(names[mode], "broadcast_step", msg.size() / 4, iters, [&] {
      gloo::BroadcastOneToAll<char>(ctx, mp, msg.size(), 0).run();
    }));
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  int world = 2, iters = 2000;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--world") && i + 1 < argc) world = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--json")) json = true;
    else {
      std::fprintf(stderr, "usage: bench_comm [--world N] [--iters N] [--json]\n");
      return 2;
    }
  }
  if (world < 2 || iters < 10) {
    std::fprintf(stderr, "bench_comm: --world >= 2 and --iters >= 10\n");
    return 2;
  }
  TcpStoreServer server("127.0.0.1", 0);
  std::vector<pid_t> pids;
  for (int r = 1; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      run_rank(r, world, server.port(), iters);
      std::_Exit(0);
    }
    pids.push_back(pid);
  }
  const std::vector<Row> rows = run_rank(0, world, server.port(), iters);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  if (json) std::printf("[");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (json) {
      std::printf("%s{\"variant\":\"%s\",\"op\":\"%s\",\"world\":%d,\"floats\":%zu,\"p10_us\":%.2f,"
                  "\"p50_us\":%.2f,\"p90_us\":%.2f}",
                  i ? "," : "", r.variant.c_str(), r.op.c_str(), world, r.floats, r.p10, r.p50, r.p90);
    } else {
      std::printf("%-20s %-15s world %d %7zu floats  p50 %8.1f us  p10 %8.1f  p90 %8.1f\n",
                  r.variant.c_str(), r.op.c_str(), world, r.floats, r.p50, r.p10, r.p90);
    }
  }
  if (json) std::printf("]\n");
  return 0;
}
