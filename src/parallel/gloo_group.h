// One gloo context over TCP (a full mesh of connections between the ranks) and the host-memory
// collectives nanovllm runs on it. Every call is collective: all ranks make it in the same order
// with the same sizes. gloo's failures (a peer that exited: "Connection reset by peer", a
// timeout) come back as nanovllm::Error naming the operation, plus what `diagnose` reports
// (rank 0: which worker process exited and how).
//
// The pairs run in gloo's synchronous mode (the calling thread reads its socket itself instead
// of waiting for gloo's event-loop thread): 18 us vs 100 us per 1024-float all-reduce measured
// on this machine; busy_poll spins on the socket instead of sleeping in recv (10 us on an idle
// machine, but much slower steps on a shared one: the engine leaves it off; docs/perf.md).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
}  // namespace gloo

namespace nanovllm {

struct GlooGroupOptions {
  std::string prefix;                    // store key prefix: one per group
  std::string listen_ip = "127.0.0.1";   // address the other ranks reach this rank on
  std::chrono::milliseconds timeout{120000};
  bool busy_poll = false;
  std::function<std::string()> diagnose;  // extra context for error messages (may be empty)
};

class GlooGroup {
 public:
  // Connects rank `rank` of `world` to every other rank through `store` (collective).
  GlooGroup(gloo::rendezvous::Store& store, int rank, int world, const GlooGroupOptions& options);
  ~GlooGroup();
  int rank() const { return rank_; }
  int world() const { return world_; }

  void all_reduce_sum_f32(float* data, size_t n);
  void all_reduce_min_i64(int64_t* data, size_t n);
  // out = the ranks' `bytes`-sized inputs back to back, in rank order (every rank receives all).
  void all_gather(const void* in, void* out, size_t bytes);
  void broadcast(void* data, size_t bytes, int root);
  void barrier();

 private:
  template <class Fn>
  void guarded(const char* op, Fn&& fn);
  int rank_ = 0, world_ = 1;
  GlooGroupOptions options_;
  std::shared_ptr<gloo::Context> ctx_;
};

}  // namespace nanovllm
