// ThreadPool: every index covered exactly once, across spin and sleep hand-offs.
#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace nanovllm {
namespace {

void expect_exact_cover(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  pool.parallel_for(n, [&](int64_t a, int64_t b) {
    EXPECT_LE(0, a);
    EXPECT_LT(a, b);
    EXPECT_LE(b, n);
    EXPECT_EQ(a % grain, 0) << "chunk start not a multiple of the grain";
    for (int64_t i = a; i < b; ++i) hits[size_t(i)].fetch_add(1);
  }, grain);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "index " << i;
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 7}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {1, 2, 5, 31, 32, 33, 1000})
      for (int64_t grain : {1, 4, 32}) expect_exact_cover(pool, n, grain);
  }
}

// Members take chunks from a shared counter, so which member runs a chunk depends on timing;
// the chunks themselves must not (thread_pool.h). One chunk is made slow in some calls to move
// the others between members. (The TeamSizer is off: a team it shrank would cut other chunks.)
TEST(ThreadPool, ChunkBoundariesDoNotDependOnTiming) {
  ThreadPool pool(2, /*spin_us=*/2000, /*adaptive=*/false);
  auto chunks = [&](bool slow_first) {
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> got;
    pool.parallel_for(1000, [&](int64_t a, int64_t b) {
      if (slow_first && a == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::lock_guard<std::mutex> lk(mu);
      got.emplace_back(a, b);
    }, 8);
    std::sort(got.begin(), got.end());
    return got;
  };
  const auto want = chunks(false);
  EXPECT_GT(want.size(), 2u);  // several chunks per member (2 members)
  for (int it = 0; it < 20; ++it) ASSERT_EQ(chunks(it % 2 == 0), want) << "call " << it;
}

TEST(ThreadPool, RunOnAllRunsEachThreadOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(4);
  pool.run_on_all([&](int tid) { seen[size_t(tid)].fetch_add(1); });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

// Back-to-back calls stay on the spinning path; results must still be complete each time.
TEST(ThreadPool, ManyBackToBackCalls) {
  ThreadPool pool(3, /*spin_us=*/5000);
  int64_t total = 0;
  for (int it = 0; it < 20000; ++it) {
    std::atomic<int64_t> sum{0};
    pool.parallel_for(64, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) sum.fetch_add(i);
    });
    ASSERT_EQ(sum.load(), 64 * 63 / 2) << "iteration " << it;
    total += sum.load();
  }
  EXPECT_EQ(total, int64_t(20000) * 2016);
}

// No spinning: every hand-off goes through the condition variables (a lost wake-up hangs here
// and ctest's timeout fails the test).
TEST(ThreadPool, SleepingHandOffs) {
  ThreadPool pool(2, /*spin_us=*/0);
  for (int it = 0; it < 2000; ++it) expect_exact_cover(pool, 100, 1);
}

// Workers fall asleep after the spin budget and wake for the next job.
TEST(ThreadPool, WakesAfterIdle) {
  ThreadPool pool(2, /*spin_us=*/200);
  for (int it = 0; it < 5; ++it) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    expect_exact_cover(pool, 1000, 8);
  }
}

TEST(ThreadPool, DestroysWhileIdle) {
  for (int spin : {0, 100000}) {
    ThreadPool pool(4, spin);
    expect_exact_cover(pool, 10, 1);
  }  // destructor joins spinning and sleeping workers alike
}

}  // namespace
}  // namespace nanovllm
