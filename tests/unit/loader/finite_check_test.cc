// Load-time NaN/Inf check: the first non-finite element of f32 / f16 / bf16 tensors, and the
// error naming the tensor for a checkpoint on disk.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "loader/finite_check.h"
#include "loader/safetensors_writer.h"
#include "loader/tensor_ops.h"
#include "loader/weight_store.h"
#include "test_util.h"

namespace nanovllm {
namespace {

using test::expect_error;
using test::TempDir;

Tensor f32(int64_t n, int64_t bad_at = -1, float bad = 0.f) {
  Tensor t = Tensor::empty({n}, DType::F32);
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = 0.5f * float(i % 7) - 1.f;
  if (bad_at >= 0) t.data<float>()[bad_at] = bad;
  return t;
}

TEST(FiniteCheck, FindsTheFirstNonFiniteElement) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(find_nonfinite(f32(10000)));
  EXPECT_FALSE(find_nonfinite(f32(10, 3, std::numeric_limits<float>::max())));  // large but finite
  auto r = find_nonfinite(f32(10000, 8191, nan));  // in the second 4096-block
  ASSERT_TRUE(r);
  EXPECT_EQ(r->index, 8191);
  EXPECT_TRUE(r->is_nan);
  r = find_nonfinite(f32(10, 9, -inf));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->index, 9);
  EXPECT_FALSE(r->is_nan);
  // Half precisions via to_dtype (the converted NaN / Inf keep their class).
  for (DType dt : {DType::BF16, DType::F16}) {
    EXPECT_FALSE(find_nonfinite(to_dtype(f32(5000), dt)));
    auto h = find_nonfinite(to_dtype(f32(5000, 4097, inf), dt));
    ASSERT_TRUE(h) << dtype_name(dt);
    EXPECT_EQ(h->index, 4097);
    EXPECT_FALSE(h->is_nan);
    h = find_nonfinite(to_dtype(f32(5000, 0, nan), dt));
    ASSERT_TRUE(h);
    EXPECT_TRUE(h->is_nan);
  }
  Tensor ints = Tensor::empty({4}, DType::I32);
  std::memset(ints.raw(), 0xff, ints.nbytes());  // all bits set: NaN as a float, fine as an int
  EXPECT_FALSE(find_nonfinite(ints));
}

TEST(FiniteCheck, CheckpointErrorNamesTheTensor) {
  TempDir d;
  write_safetensors(d / "model.safetensors", {{"a.weight", f32(100)},
                                              {"b.weight", f32(100, 42, std::numeric_limits<float>::infinity())}});
  auto ws = WeightStore::open_dir(d.path.string());
  expect_error([&] { check_finite_weights(ws); }, {"tensor 'b.weight'", "Inf at element 42", "--allow-nonfinite-weights"});
  TempDir ok;
  write_safetensors(ok / "model.safetensors", {{"a.weight", f32(100)}});
  EXPECT_NO_THROW(check_finite_weights(WeightStore::open_dir(ok.path.string())));
}

}  // namespace
}  // namespace nanovllm
