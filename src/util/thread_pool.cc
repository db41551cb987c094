#include "util/thread_pool.h"

#include <algorithm>
#include <cstdlib>

namespace nanovllm {

ThreadPool::ThreadPool(int n) {
  if (n <= 0) n = int(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = n;
  for (int i = 1; i < n; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int tid) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(tid);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (num_threads_ == 1) {
    fn(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    job_ = &fn;
    pending_ = num_threads_ - 1;
    ++generation_;
  }
  cv_.notify_all();
  fn(0);
  std::unique_lock<std::mutex> lk(mu_);
  done_cv_.wait(lk, [&] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t units = (n + grain - 1) / grain;
  int workers = int(std::min<int64_t>(num_threads_, units));
  if (workers <= 1) {
    fn(0, n);
    return;
  }
  run_on_all([&](int tid) {
    if (tid >= workers) return;
    int64_t lo = units * tid / workers * grain;
    int64_t hi = std::min(n, units * (tid + 1) / workers * grain);
    if (lo < hi) fn(lo, hi);
  });
}

ThreadPool& default_thread_pool() {
  static ThreadPool pool([] {
    const char* e = std::getenv("NANOVLLM_NUM_THREADS");
    return e ? std::atoi(e) : 0;
  }());
  return pool;
}

}  // namespace nanovllm
