#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>

#ifdef NANOVLLM_OMP_POOL
#include <omp.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NV_CPU_RELAX() _mm_pause()
#else
#define NV_CPU_RELAX() std::this_thread::yield()
#endif

namespace nanovllm {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Spins until pred() or `budget_ns` elapses; true when pred() held. After the first
// kPauseOnlyNs the loop also yields, so a pool with more threads than free cores (another busy
// process, an oversubscribed test) hands its core to the thread it waits for instead of burning
// the time slice.
constexpr int64_t kPauseOnlyNs = 20000;
template <class Pred>
bool spin_until(Pred pred, int64_t budget_ns) {
  if (budget_ns <= 0) return pred();
  const int64_t t0 = now_ns();
  bool yielding = false;
  for (int i = 0;; ++i) {
    if (pred()) return true;
    if (yielding) {
      std::this_thread::yield();
    } else {
      NV_CPU_RELAX();
    }
    if ((i & 63) == 63) {
      int64_t dt = now_ns() - t0;
      if (dt > budget_ns) return pred();
      yielding = dt > kPauseOnlyNs;
    }
  }
}

constexpr int64_t kChunksPerMember = 4;

// n <= 0: the hardware concurrency. (Config::backend.num_threads, filled from
// NANOVLLM_NUM_THREADS, reaches here through the backend factory.)
int resolve_threads(int n) {
  return n > 0 ? n : int(std::max(1u, std::thread::hardware_concurrency()));
}
}  // namespace

ThreadPool::ThreadPool(int n, int spin_us, bool adaptive)
    : num_threads_(resolve_threads(n)),
      sizer_(num_threads_, adaptive),
      start_ns_(size_t(num_threads_), 0),
      delay_ns_(size_t(num_threads_), 0) {
  spin_ns_ = int64_t(std::max(0, spin_us)) * 1000;
#ifndef NANOVLLM_OMP_POOL
  for (int i = 1; i < num_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
#endif
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

int ThreadPool::active_threads() { return num_threads_ == 1 ? 1 : sizer_.team(now_ns()); }

void ThreadPool::worker(int tid) {
  uint64_t seen = 0;
  for (;;) {
    auto ready = [&] { return generation_.load() != seen || stop_.load(); };
    auto ready_or_parked = [&] { return ready() || park_.load(); };
    if (!spin_until(ready_or_parked, spin_ns_) || !ready()) {
      std::unique_lock<std::mutex> lk(mu_);
      sleepers_.fetch_add(1);
      cv_.wait(lk, ready);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load();
    // team_ and job_ were published before this generation; a worker outside the team must not
    // touch the job (the caller does not wait for it).
    if (tid >= team_) continue;
    start_ns_[size_t(tid)] = now_ns();
    (*job_)(tid);
    if (pending_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lk(mu_);
      done_cv_.notify_one();
    }
  }
}

// member_fn(m) for m in [0, team) on `team` threads (the caller is member 0), then the
// lateness of the other members goes to the TeamSizer.
void ThreadPool::run_team(int team, const std::function<void(int)>& member_fn) {
  const int64_t t0 = now_ns();
  std::fill(start_ns_.begin(), start_ns_.end(), t0);
#ifdef NANOVLLM_OMP_POOL
#pragma omp parallel num_threads(team)
  {
    const int me = omp_get_thread_num(), got = omp_get_num_threads();
    if (me > 0) start_ns_[size_t(me)] = now_ns();
    // The runtime may give fewer threads than asked (nested call, OMP_THREAD_LIMIT).
    for (int m = me; m < team; m += got) member_fn(m);
  }
#else
  job_ = &member_fn;
  team_ = team;
  park_.store(false);
  pending_.store(team - 1);
  generation_.fetch_add(1);  // seq_cst: publishes job_, team_ and pending_
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lk(mu_);  // a sleeper is either waiting or will see the generation
    cv_.notify_all();
  }
  member_fn(0);
  auto done = [&] { return pending_.load() == 0; };
  if (!spin_until(done, spin_ns_)) {
    std::unique_lock<std::mutex> lk(mu_);
    caller_sleeping_.store(true);
    done_cv_.wait(lk, done);
    caller_sleeping_.store(false);
  }
  job_ = nullptr;
#endif
  for (int m = 1; m < team; ++m) delay_ns_[size_t(m - 1)] = start_ns_[size_t(m)] - t0;
  sizer_.record(team, delay_ns_.data(), now_ns());
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  const int team = active_threads();
  if (team == 1) {
    for (int tid = 0; tid < num_threads_; ++tid) fn(tid);
    return;
  }
  run_team(team, [&](int m) {
    for (int tid = m; tid < num_threads_; tid += team) fn(tid);
  });
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t units = (n + grain - 1) / grain;
  if (units <= 1 || num_threads_ == 1) {
    fn(0, n);
    return;
  }
  const int workers = int(std::min<int64_t>(active_threads(), units));
  if (workers <= 1) {
    fn(0, n);
    return;
  }
  // kChunksPerMember fixed chunks per member, taken in order from a shared counter: a member
  // that runs slower (a vCPU whose host core is busy elsewhere) takes fewer, instead of the
  // others waiting for its equal share at the region's end.
  const int64_t chunks = std::min<int64_t>(units, int64_t(workers) * kChunksPerMember);
  std::atomic<int64_t> next{0};
  run_team(workers, [&](int) {
    for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < chunks;
         c = next.fetch_add(1, std::memory_order_relaxed)) {
      const int64_t lo = units * c / chunks * grain, hi = std::min(n, units * (c + 1) / chunks * grain);
      if (lo < hi) fn(lo, hi);
    }
  });
}

}  // namespace nanovllm
