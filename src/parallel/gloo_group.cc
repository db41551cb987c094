#include "parallel/gloo_group.h"

#include <gloo/allgather_ring.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <climits>
#include <csignal>
#include <cstring>
#include <vector>

#include "util/check.h"

namespace nanovllm {

template <class Fn>
void GlooGroup::guarded(const char* op, Fn&& fn) {
  try {
    fn();
  } catch (const gloo::Exception& e) {
    std::string extra = options_.diagnose ? options_.diagnose() : std::string();
    // gloo prefixes its messages with its own source location ("[./gloo/transport/tcp/pair.cc:589]
    // Read error ..."): users get the error, not gloo's file.
    std::string what = e.what();
    if (what.size() > 2 && what[0] == '[') {
      const size_t close = what.find("] ");
      if (close != std::string::npos && what.rfind(':', close) != std::string::npos) what.erase(0, close + 2);
    }
    NV_THROW("tensor-parallel ", op, " failed on rank ", rank_, " of ", world_, " (group '",
             options_.prefix, "'): ", what, extra.empty() ? "" : "; ", extra);
  }
}

namespace {

// gloo's TCP pairs write with writev(), which raises SIGPIPE when the peer is gone (a worker
// killed in the middle of a step): its default action killed rank 0 with no message (exit -13)
// about one time in four in e2e_test_tensor_parallel. Ignored, the write fails with EPIPE, gloo
// throws, and guarded() turns that into the clear error naming the dead worker. Only the default
// disposition is changed: a handler the embedding program installed is kept. (Python ignores
// SIGPIPE already; the server does too.)
void ignore_default_sigpipe() {
  struct sigaction old {};
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
}

}  // namespace

GlooGroup::GlooGroup(gloo::rendezvous::Store& store, int rank, int world,
                     const GlooGroupOptions& options)
    : rank_(rank), world_(world), options_(options) {
  NV_CHECK(world >= 1 && rank >= 0 && rank < world, "gloo group: rank ", rank, " of ", world);
  if (world > 1) ignore_default_sigpipe();
  gloo::transport::tcp::attr attr;
  attr.hostname = options.listen_ip;
  attr.ai_family = AF_INET;
  guarded("connect", [&] {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
    ctx->setTimeout(options.timeout);
    gloo::rendezvous::PrefixStore prefixed(options.prefix, store);
    ctx->connectFullMesh(prefixed, device);
    for (int i = 0; i < world; ++i)
      if (i != rank) ctx->getPair(i)->setSync(true, options.busy_poll);
    ctx_ = std::move(ctx);
  });
}

GlooGroup::~GlooGroup() = default;

void GlooGroup::all_reduce_sum_f32(float* data, size_t n) {
  if (world_ == 1 || n == 0) return;
  NV_CHECK(n <= size_t(INT_MAX), "all_reduce: ", n, " elements exceed gloo's int count");
  guarded("all_reduce", [&] {
    std::vector<float*> ptrs{data};
    // Two ranks: the plain ring (one exchange; a + b == b + a, so both ranks get the same bits).
    // More: the chunked ring (reduce-scatter then all-gather), where each element is summed in
    // one order on one rank and copied to the others, so every rank holds identical values.
    if (world_ == 2) {
      gloo::AllreduceRing<float>(ctx_, ptrs, int(n)).run();
    } else {
      gloo::AllreduceRingChunked<float>(ctx_, ptrs, int(n)).run();
    }
  });
}

void GlooGroup::all_reduce_min_i64(int64_t* data, size_t n) {
  if (world_ == 1 || n == 0) return;
  guarded("all_reduce(min)", [&] {
    std::vector<int64_t*> ptrs{data};
    gloo::AllreduceRing<int64_t>(ctx_, ptrs, int(n), gloo::ReductionFunction<int64_t>::min).run();
  });
}

void GlooGroup::all_gather(const void* in, void* out, size_t bytes) {
  if (world_ == 1) {
    if (bytes && in != out) std::memcpy(out, in, bytes);
    return;
  }
  NV_CHECK(bytes <= size_t(INT_MAX), "all_gather: ", bytes, " bytes exceed gloo's int count");
  guarded("all_gather", [&] {
    std::vector<const char*> ins{static_cast<const char*>(in)};
    gloo::AllgatherRing<char>(ctx_, ins, static_cast<char*>(out), int(bytes)).run();
  });
}

void GlooGroup::broadcast(void* data, size_t bytes, int root) {
  if (world_ == 1 || bytes == 0) return;
  NV_CHECK(bytes <= size_t(INT_MAX), "broadcast: ", bytes, " bytes exceed gloo's int count");
  guarded("broadcast", [&] {
    std::vector<char*> ptrs{static_cast<char*>(data)};
    gloo::BroadcastOneToAll<char>(ctx_, ptrs, bytes, root).run();
  });
}

void GlooGroup::barrier() {
  if (world_ == 1) return;
  guarded("barrier", [&] { gloo::BarrierAllToOne(ctx_).run(); });
}

}  // namespace nanovllm
