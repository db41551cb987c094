// concat_rows / shard_dim / to_dtype: element-by-element against index arithmetic.
#include <gtest/gtest.h>

#include "loader/tensor_ops.h"
#include "test_util.h"

namespace nanovllm {
namespace {

// t[i] = base + i, as F32.
Tensor iota(const Shape& s, float base = 0) {
  Tensor t = Tensor::empty(s, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = base + float(i);
  return t;
}

TEST(TensorOps, ConcatRows) {
  Tensor a = iota({2, 3}), b = iota({1, 3}, 100), c = iota({0, 3});
  Tensor r = concat_rows({a, c, b});
  ASSERT_EQ(r.shape(), Shape({3, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r.data<float>()[i], float(i));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.data<float>()[6 + i], 100.f + float(i));
  test::expect_error([&] { concat_rows({a, iota({1, 4})}); }, {"trailing"});
  test::expect_error([&] { concat_rows({a, to_dtype(b, DType::BF16)}); }, {"incompatible"});
  test::expect_error([&] { concat_rows({}); }, {"no tensors"});
}

TEST(TensorOps, ShardDim0And1) {
  Tensor t = iota({4, 6});  // t[r][c] = 6r + c
  for (int rank = 0; rank < 2; ++rank) {
    Tensor s0 = shard_dim(t, 0, rank, 2);
    ASSERT_EQ(s0.shape(), Shape({2, 6}));
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 6; ++c)
        EXPECT_EQ(s0.data<float>()[r * 6 + c], float(6 * (rank * 2 + r) + c));
  }
  for (int rank = 0; rank < 3; ++rank) {
    Tensor s1 = shard_dim(t, 1, rank, 3);
    ASSERT_EQ(s1.shape(), Shape({4, 2}));
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 2; ++c)
        EXPECT_EQ(s1.data<float>()[r * 2 + c], float(6 * r + rank * 2 + c));
  }
  // dim 1 of a 3-d tensor [2, 4, 3]: slices keep the innermost dimension whole.
  Tensor u = iota({2, 4, 3});
  Tensor s = shard_dim(u, 1, 1, 2);
  ASSERT_EQ(s.shape(), Shape({2, 2, 3}));
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 3; ++c)
        EXPECT_EQ(s.data<float>()[(a * 2 + b) * 3 + c], float(a * 12 + (2 + b) * 3 + c));
  test::expect_error([&] { shard_dim(t, 0, 0, 3); }, {"divisible"});
  test::expect_error([&] { shard_dim(t, 1, 2, 2); }, {"rank"});
  test::expect_error([&] { shard_dim(iota({4}), 1, 0, 2); }, {"out of range"});
}

TEST(TensorOps, ToDtype) {
  Tensor t = Tensor::empty({4}, DType::F32);
  float v[4] = {1.f, -0.375f, 3.0e38f, 1.0f + 1.0f / 512};  // last is not exact in bf16
  for (int i = 0; i < 4; ++i) t.data<float>()[i] = v[i];
  Tensor b = to_dtype(t, DType::BF16);
  ASSERT_EQ(b.dtype(), DType::BF16);
  EXPECT_EQ(b.data<uint16_t>()[0], 0x3f80);  // 1.0
  EXPECT_EQ(b.data<uint16_t>()[1], 0xbec0);  // -0.375
  EXPECT_EQ(b.data<uint16_t>()[3], 0x3f80);  // 1 + 2^-9 rounds to even -> 1.0
  Tensor h = to_dtype(t, DType::F16);
  EXPECT_EQ(h.data<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(h.data<uint16_t>()[1], 0xb600);
  EXPECT_EQ(h.data<uint16_t>()[2], 0x7c00);  // overflow -> +inf
  Tensor back = to_dtype(b, DType::F32);
  EXPECT_EQ(back.data<float>()[1], -0.375f);
  Tensor same = to_dtype(t, DType::F32);
  EXPECT_NE(same.raw(), t.raw());  // a copy
  EXPECT_EQ(same.data<float>()[3], v[3]);

  Tensor i = Tensor::empty({2}, DType::I64);
  i.data<int64_t>()[0] = -5;
  i.data<int64_t>()[1] = int64_t(1) << 40;
  test::expect_error([&] { to_dtype(i, DType::I32); }, {"does not fit"});
  i.data<int64_t>()[1] = 9;
  Tensor i32 = to_dtype(i, DType::I32);
  EXPECT_EQ(i32.data<int32_t>()[0], -5);
  EXPECT_EQ(i32.data<int32_t>()[1], 9);
  test::expect_error([&] { to_dtype(i, DType::F32); }, {"unsupported"});
}

}  // namespace
}  // namespace nanovllm
