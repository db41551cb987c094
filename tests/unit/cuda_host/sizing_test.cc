#include "kernels/cuda/sizing.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

constexpr int64_t MiB = 1 << 20;

TEST(CudaSizing, MatchesFormula) {
  // 80 GiB card, 20 GiB in use (weights + context), warm-up peak 6 GiB of which 1 GiB is still
  // allocated; 90% utilization; 2 MiB blocks.
  const int64_t total = 80 * 1024 * MiB, free = 60 * 1024 * MiB;
  const int64_t peak = 6 * 1024 * MiB, current = 1024 * MiB;
  const int64_t bb = 2 * MiB;
  const double want = (0.9 * double(total) - double(total - free) - double(peak) + double(current));
  EXPECT_EQ(compute_num_kv_blocks(total, free, peak, current, 0.9, bb), int64_t(want / double(bb)));
  // Smaller utilization -> fewer blocks; larger block -> fewer blocks.
  EXPECT_LT(compute_num_kv_blocks(total, free, peak, current, 0.5, bb),
            compute_num_kv_blocks(total, free, peak, current, 0.9, bb));
  EXPECT_EQ(compute_num_kv_blocks(total, free, peak, current, 0.9, 2 * bb),
            int64_t(want / double(2 * bb)));
}

TEST(CudaSizing, ExactSmallNumbers) {
  // total 1000, used 100, util 0.5 -> 500 - 100 - 150 + 50 = 300 bytes -> 3 blocks of 100.
  EXPECT_EQ(compute_num_kv_blocks(1000, 900, 150, 50, 0.5, 100), 3);
  EXPECT_EQ(compute_num_kv_blocks(1000, 900, 150, 50, 0.5, 150), 2);
  EXPECT_EQ(compute_num_kv_blocks(1000, 900, 150, 50, 0.5, 300), 1);
}

TEST(CudaSizing, TooLittleMemoryIsAClearError) {
  try {
    compute_num_kv_blocks(1000, 900, 150, 50, 0.5, 301);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not enough GPU memory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compute_num_kv_blocks(1000, 100, 0, 0, 0.5, 1), Error);    // used > budget
  EXPECT_THROW(compute_num_kv_blocks(1000, 900, 0, 0, 1.5, 1), Error);    // bad utilization
  EXPECT_THROW(compute_num_kv_blocks(1000, 900, 0, 0, 0.5, 0), Error);    // bad block size
  EXPECT_THROW(compute_num_kv_blocks(1000, 900, 10, 20, 0.5, 1), Error);  // peak < current
}

}  // namespace
}  // namespace nanovllm
