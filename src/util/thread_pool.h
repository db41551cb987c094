// A fixed pool of worker threads for CPU kernels. parallel_for splits [0, n) into contiguous
// chunks, 4 per thread of the region's team, that the members take in order from a shared
// counter (a slower member takes fewer); it is not re-entrant (kernels never nest it). Chunk
// boundaries depend on n, grain and the team size, never on timing; which member runs a chunk
// does (kernels give the same bits for any partition: docs/determinism.md).
//
// Two implementations behind one interface (CMake option NANOVLLM_OPENMP):
// - OpenMP (default): run_on_all is an OpenMP parallel region, so these ops and oneDNN's GEMMs
//   (Debian's oneDNN uses libgomp) share one set of threads instead of two spinning pools.
// - std::thread: hand-offs spin before they sleep. A decode step issues ~100-200 parallel_for
//   calls of 50-500 us, and a futex wake-up costs tens of microseconds on a VM, so workers spin
//   on the job generation for up to spin_us microseconds (default 2000) after their
//   last job, then block on a condition variable (an idle pool costs no CPU). park() sends them
//   to sleep at once before a library with its own threads runs.
// Both size each region's team with a TeamSizer (team_sizer.h): when another process keeps a
// core busy, the pool stops waiting on the thread that shares it (adaptive = false turns this
// off). The engine's values come from Config::backend (nanovllm/backend_options.h).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "util/team_sizer.h"

namespace nanovllm {

class ThreadPool {
 public:
  // num_threads: total threads including the caller; <= 0: the hardware concurrency.
  // spin_us: how long idle threads spin before sleeping. adaptive: TeamSizer on / off.
  explicit ThreadPool(int num_threads, int spin_us = 2000, bool adaptive = true);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }
  // Threads the next region will use (size() unless contention shrank the team). Libraries
  // with their own threading (oneDNN, OpenBLAS) should be given this many.
  int active_threads();
  // fn(begin, end) on disjoint chunks covering [0, n); chunks are multiples of `grain`. A
  // member may run several chunks, one call each.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);
  // fn(tid) once for each tid in [0, size()); tids run on the region's team (a team smaller
  // than size() runs several tids per thread, in order).
  void run_on_all(const std::function<void(int)>& fn);
  // Spinning workers go to sleep now (until the next job): call before handing the cores to a
  // library with its own threads (oneDNN / OpenBLAS use OpenMP), so nobody spins against them.
  void park() { park_.store(true); }
  const TeamSizer& team_sizer() const { return sizer_; }

 private:
  void worker(int tid);
  void run_team(int team, const std::function<void(int)>& fn);
  int num_threads_;
  int64_t spin_ns_;
  TeamSizer sizer_;
  std::vector<int64_t> start_ns_;  // per team member: when it started the current region
  std::vector<int64_t> delay_ns_;  // members 1..: start - publication (for the TeamSizer)
  std::vector<std::thread> threads_;
  // Handshake: the caller publishes job_ and team_ then bumps generation_ (release); workers
  // with tid < team_ that see a new generation run the job and decrement pending_. sleepers_ /
  // caller_sleeping_ say whether a notify is needed (checked after the store; seq_cst on both
  // sides, so no wake-up is lost).
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> park_{false};
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<int> team_{1};
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
};

// Items per parallel_for chunk so that a chunk holds at least `min_work` (items cost
// `work_per_item` each), rounded up to a multiple of `grain`. A region hand-off costs a few
// microseconds (more when a core is contended), so tiny ops run faster on the caller alone.
inline int64_t grain_for_work(int64_t work_per_item, int64_t min_work, int64_t grain = 1) {
  if (work_per_item < 1) work_per_item = 1;
  int64_t items = (min_work + work_per_item - 1) / work_per_item;
  return (items + grain - 1) / grain * grain;
}

}  // namespace nanovllm
