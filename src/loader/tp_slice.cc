#include "loader/tp_slice.h"

#include "loader/int4_slice.h"
#include "loader/tensor_ops.h"

#include <algorithm>
#include <cstring>

namespace nanovllm {

namespace {
// Copies rows [begin, begin + count) of a host tensor, zero-filling rows past its end.
Tensor copy_rows_padded(const Tensor& t, int64_t begin, int64_t count) {
  Shape s = t.shape();
  s[0] = count;
  Tensor out = Tensor::zeros(s, t.dtype());
  const int64_t have = std::clamp<int64_t>(t.size(0) - begin, 0, count);
  const size_t row_bytes = dtype_size(t.dtype()) * size_t(t.size(0) ? t.numel() / t.size(0) : 0);
  if (have > 0) std::memcpy(out.raw(), t.rows(begin, begin + have).raw(), row_bytes * size_t(have));
  return out;
}
}  // namespace

Tensor load_column_parallel(const WeightStore& ws, const std::vector<std::string>& names,
                            const std::vector<Shape>& expected, const std::vector<RowRange>& rows) {
  NV_CHECK_EQ(names.size(), expected.size());
  NV_CHECK(rows.empty() || rows.size() == names.size(), "load_column_parallel: ", rows.size(),
           " row ranges for ", names.size(), " tensors");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < names.size(); ++i) {
    Tensor t = ws.take(names[i], expected[i]);
    if (!rows.empty() && !(rows[i].begin == 0 && rows[i].count == t.size(0))) {
      NV_CHECK(rows[i].begin >= 0 && rows[i].count >= 0 && rows[i].begin + rows[i].count <= t.size(0),
               "tensor '", names[i], "' ", t.str(), " has no rows [", rows[i].begin, ", ",
               rows[i].begin + rows[i].count, ")");
      t = copy_rows_padded(t, rows[i].begin, rows[i].count);
    }
    parts.push_back(t);
  }
  if (parts.size() == 1) return parts[0];
  // Parts of different dtypes (a GPTQ / AWQ checkpoint that left one of them unquantized: the
  // others are f32 dequantizations) fuse in f32, exactly.
  for (const Tensor& p : parts)
    if (p.dtype() != parts[0].dtype()) {
      for (Tensor& q : parts) q = to_dtype(q, DType::F32);
      break;
    }
  return concat_rows(parts);
}

Tensor load_row_parallel(const WeightStore& ws, const std::string& name, const Shape& expected,
                         const TpInfo& tp) {
  Tensor t = ws.take(name, expected);
  if (tp.world == 1) return t;
  NV_CHECK_EQ(t.size(1) % tp.world, 0, "tensor '", name, "' columns not divisible by TP size");
  return shard_dim(t, 1, tp.rank, tp.world);
}

Tensor load_vocab_parallel(const WeightStore& ws, const std::string& name, const Shape& expected,
                           int64_t begin, int64_t rows) {
  Tensor t = ws.take(name, expected);
  if (begin == 0 && rows == t.size(0)) return t;
  return copy_rows_padded(t, begin, rows);
}

Tensor load_replicated(const WeightStore& ws, const std::string& name, const Shape& expected) {
  return ws.take(name, expected);
}

std::optional<Int4Groups> load_column_parallel_int4(const WeightStore& ws, const std::vector<std::string>& names,
                                                    const std::vector<Shape>& expected,
                                                    const std::vector<RowRange>& rows) {
  NV_CHECK_EQ(names.size(), expected.size());
  NV_CHECK(rows.empty() || rows.size() == names.size(), "load_column_parallel_int4: ", rows.size(),
           " row ranges for ", names.size(), " tensors");
  // Parts of one fused weight share one layout; Q4_K q / k with a Q6_K (or IQ4) v are not one
  // int4 weight (the caller loads each part alone: DecoderModel::column_linear).
  for (const std::string& n : names)
    if (!ws.has_int4(n) || ws.int4_bits(n) != ws.int4_bits(names[0]) ||
        ws.int4_table(n) != ws.int4_table(names[0]))
      return std::nullopt;
  std::vector<Int4Groups> parts;
  for (size_t i = 0; i < names.size(); ++i) {
    Int4Groups w = ws.take_int4(names[i], expected[i]);
    if (!rows.empty() && !(rows[i].begin == 0 && rows[i].count == w.N)) {
      NV_CHECK(rows[i].begin >= 0 && rows[i].count >= 0 && rows[i].begin + rows[i].count <= w.N, "tensor '",
               names[i], "' [", w.N, ", ", w.K, "] has no rows [", rows[i].begin, ", ",
               rows[i].begin + rows[i].count, ")");
      w = int4_rows(w, rows[i].begin, rows[i].count);
    }
    parts.push_back(std::move(w));
  }
  return int4_concat_rows(parts, names);
}

std::optional<Int4Groups> load_vocab_parallel_int4(const WeightStore& ws, const std::string& name,
                                                   const Shape& expected, int64_t begin, int64_t rows) {
  if (!ws.has_int4(name)) return std::nullopt;
  Int4Groups w = ws.take_int4(name, expected);
  NV_CHECK(begin >= 0 && rows > 0, "tensor '", name, "': no rows [", begin, ", ", begin + rows, ")");
  // As copy_rows_padded: the rows that exist, then zero rows (a shard may start past V).
  const int64_t real = std::clamp<int64_t>(w.N - begin, 0, rows);
  if (begin == 0 && real == w.N && rows == w.N) return w;
  if (real == rows) return int4_rows(w, begin, real);
  // Rows past the vocabulary: all-zero scales and factors (a zero weight in every layout).
  Int4Groups pad = int4_rows(w, 0, std::min(rows - real, w.N));
  for (Tensor* t : {&pad.scales, &pad.mins, &pad.d, &pad.dmin, &pad.sub_scale, &pad.sub_min})
    if (t->defined()) std::memset(t->raw(), 0, t->nbytes());
  std::vector<Int4Groups> parts;
  if (real > 0) parts.push_back(int4_rows(w, begin, real));
  for (int64_t n = real; n < rows; n += pad.N) parts.push_back(n + pad.N <= rows ? pad : int4_rows(pad, 0, rows - n));
  return int4_concat_rows(parts, std::vector<std::string>(parts.size(), name));
}

std::optional<Int4Groups> load_row_parallel_int4(const WeightStore& ws, const std::string& name,
                                                 const Shape& expected, const TpInfo& tp) {
  if (!ws.has_int4(name)) return std::nullopt;
  Int4Groups w = ws.take_int4(name, expected);
  if (tp.world == 1) return w;
  NV_CHECK_EQ(w.K % tp.world, 0, "tensor '", name, "' columns not divisible by TP size");
  const int64_t k = w.K / tp.world;
  return int4_columns(w, tp.rank * k, k);
}

}  // namespace nanovllm
