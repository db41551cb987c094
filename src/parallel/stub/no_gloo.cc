// Compiled instead of tcp_store.cc, gloo_group.cc and process_group.cc when gloo is not found
// (the bare GPU machine's bundle has no gloo): a single rank still runs, tensor parallelism is
// a clear error.
#include "parallel/process_group.h"
#include "parallel/worker_processes.h"
#include "util/check.h"

namespace nanovllm {

// tcp_store.h needs gloo's headers; without gloo these two are never constructed, but
// ProcessGroup's unique_ptr members need complete types for its destructor.
class TcpStoreServer {};
class TcpStore {};

namespace {
[[noreturn]] void no_gloo() {
  NV_THROW("tensor parallelism needs gloo, and this nanovllm was built without it (install "
           "libgloo-dev and reconfigure); use tensor_parallel_size 1");
}
}  // namespace

ProcessGroup::ProcessGroup(const DistOptions& options) : options_(options) { no_gloo(); }
ProcessGroup::~ProcessGroup() = default;
std::unique_ptr<GlooGroup> ProcessGroup::make_group(const std::string&, bool,
                                                    std::chrono::milliseconds) {
  no_gloo();
}
std::string ProcessGroup::diagnose() { return ""; }
void ProcessGroup::shutdown_workers(std::chrono::milliseconds) {}
std::vector<int> ProcessGroup::worker_pids() const { return {}; }

GlooGroup::GlooGroup(gloo::rendezvous::Store&, int, int, const GlooGroupOptions&) { no_gloo(); }
GlooGroup::~GlooGroup() = default;
void GlooGroup::all_reduce_sum_f32(float*, size_t) { no_gloo(); }
void GlooGroup::all_reduce_min_i64(int64_t*, size_t) { no_gloo(); }
void GlooGroup::all_gather(const void*, void*, size_t) { no_gloo(); }
void GlooGroup::broadcast(void*, size_t, int) { no_gloo(); }
void GlooGroup::barrier() { no_gloo(); }

}  // namespace nanovllm
