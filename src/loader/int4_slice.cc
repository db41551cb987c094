#include "loader/int4_slice.h"

#include <cstring>

#include "util/check.h"

namespace nanovllm {

namespace {
// Rows [begin, begin + count) of a row-major 2-D tensor, copied.
Tensor copy_rows(const Tensor& t, int64_t begin, int64_t count) {
  Tensor out = Tensor::empty({count, t.size(1)}, t.dtype());
  std::memcpy(out.raw(), t.rows(begin, begin + count).raw(), out.nbytes());
  return out;
}
}  // namespace

Int4Groups int4_rows(const Int4Groups& w, int64_t begin, int64_t count) {
  NV_CHECK(begin >= 0 && count >= 0 && begin + count <= w.N, "int4 weight [", w.N, ", ", w.K,
           "] has no rows [", begin, ", ", begin + count, ")");
  Int4Groups r = w;
  r.N = count;
  r.q = copy_rows(w.q, begin, count);
  r.scales = copy_rows(w.scales, begin, count);
  if (w.has_mins()) r.mins = copy_rows(w.mins, begin, count);
  else if (w.zeros.defined()) r.zeros = copy_rows(w.zeros, begin, count);  // (none with iq4_table)
  if (w.has_superblocks()) {
    r.d = copy_rows(w.d, begin, count);
    r.sub_scale = copy_rows(w.sub_scale, begin, count);
    if (w.dmin.defined()) r.dmin = copy_rows(w.dmin, begin, count);
    if (w.sub_min.defined()) r.sub_min = copy_rows(w.sub_min, begin, count);
  }
  return r;
}

Int4Groups int4_columns(const Int4Groups& w, int64_t begin, int64_t count) {
  NV_CHECK(begin >= 0 && count >= 0 && begin + count <= w.K, "int4 weight [", w.N, ", ", w.K,
           "] has no input features [", begin, ", ", begin + count, ")");
  Int4Groups r = w;
  r.K = count;
  r.q = Tensor::empty({w.N, count}, DType::U8);
  for (int64_t n = 0; n < w.N; ++n)
    std::memcpy(r.q.data<uint8_t>() + n * count, w.q.data<uint8_t>() + n * w.K + begin, size_t(count));
  r.g_idx = Tensor::empty({count}, DType::I32);
  std::memcpy(r.g_idx.raw(), w.g_idx.data<int32_t>() + begin, size_t(count) * 4);
  return r;
}

Int4Groups int4_concat_rows(const std::vector<Int4Groups>& parts, const std::vector<std::string>& names) {
  NV_CHECK(!parts.empty() && parts.size() == names.size(), "int4_concat_rows: ", parts.size(), " parts, ",
           names.size(), " names");
  if (parts.size() == 1) return parts[0];
  const Int4Groups& a = parts[0];
  Int4Groups r = a;
  r.N = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Int4Groups& p = parts[i];
    NV_CHECK(p.bits == a.bits, "'", names[i], "' has ", p.bits, "-bit codes, '", names[0], "' ", a.bits,
             ": they cannot be one int4 weight");
    NV_CHECK(p.iq4_table == a.iq4_table, "'", names[i], "' and '", names[0],
             "' differ in their codes (ggml's IQ4 table / integers): they cannot be one int4 weight");
    NV_CHECK(p.has_mins() == a.has_mins(), "'", names[i], "' and '", names[0],
             "' store their groups differently (scale and min / integer zero points)");
    NV_CHECK(p.K == a.K && p.G == a.G, "'", names[i], "' has ", p.K, " input features in ", p.G, " groups, '",
             names[0], "' ", a.K, " in ", a.G, ": they cannot share one input");
    NV_CHECK(std::memcmp(p.g_idx.raw(), a.g_idx.raw(), size_t(a.K) * 4) == 0, "'", names[i], "' and '", names[0],
             "' have different g_idx (act-order group orders) but share one input, which the int4 "
             "kernels gather once; load with --quantization none (exact dense) or int4 (re-quantized)");
    r.N += p.N;
  }
  r.q = Tensor::empty({r.N, a.K}, DType::U8);
  r.scales = Tensor::empty({r.N, a.G}, DType::F32);
  if (a.has_mins()) r.mins = Tensor::empty({r.N, a.G}, DType::F32);
  else if (a.zeros.defined()) r.zeros = Tensor::empty({r.N, a.G}, DType::U8);
  // Superblock factors survive when every part has them (else the f32 products carry on alone).
  bool sb = true;
  for (const Int4Groups& p : parts) sb = sb && p.has_superblocks();
  r.d = r.dmin = r.sub_scale = r.sub_min = Tensor();
  const bool mins = sb && a.dmin.defined();  // Q4_K's (Q6_K has no min factors)
  if (sb) {
    r.d = Tensor::empty({r.N, a.d.size(1)}, DType::F32);
    r.sub_scale = Tensor::empty({r.N, a.G}, DType::U8);
    if (mins) {
      r.dmin = Tensor::empty({r.N, a.d.size(1)}, DType::F32);
      r.sub_min = Tensor::empty({r.N, a.G}, DType::U8);
    }
  }
  int64_t row = 0;
  for (const Int4Groups& p : parts) {
    std::memcpy(r.q.data<uint8_t>() + row * a.K, p.q.raw(), p.q.nbytes());
    std::memcpy(r.scales.data<float>() + row * a.G, p.scales.raw(), p.scales.nbytes());
    if (a.has_mins()) std::memcpy(r.mins.data<float>() + row * a.G, p.mins.raw(), p.mins.nbytes());
    else if (a.zeros.defined()) std::memcpy(r.zeros.data<uint8_t>() + row * a.G, p.zeros.raw(), p.zeros.nbytes());
    if (sb) {
      NV_CHECK(p.d.size(1) == a.d.size(1), "'", names[0], "': superblock counts differ");
      std::memcpy(r.d.data<float>() + row * a.d.size(1), p.d.raw(), p.d.nbytes());
      std::memcpy(r.sub_scale.data<uint8_t>() + row * a.G, p.sub_scale.raw(), p.sub_scale.nbytes());
      if (mins) {
        std::memcpy(r.dmin.data<float>() + row * a.d.size(1), p.dmin.raw(), p.dmin.nbytes());
        std::memcpy(r.sub_min.data<uint8_t>() + row * a.G, p.sub_min.raw(), p.sub_min.nbytes());
      }
    }
    row += p.N;
  }
  return r;
}

}  // namespace nanovllm
