// A fixed pool of worker threads for CPU kernels. parallel_for splits [0, n) into contiguous
// chunks, one per worker plus the caller; it is not re-entrant (kernels never nest it).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nanovllm {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // total threads including the caller; <=0: hardware
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }
  // fn(begin, end) on disjoint chunks covering [0, n); chunks are multiples of `grain`.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);
  // fn(tid) once on each of size() threads.
  void run_on_all(const std::function<void(int)>& fn);

 private:
  void worker(int tid);
  int num_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

// The process-wide pool used by CPU kernels (created on first use with NANOVLLM_NUM_THREADS or
// the hardware concurrency). Kernels take it as a parameter; this is only the default.
ThreadPool& default_thread_pool();

}  // namespace nanovllm
