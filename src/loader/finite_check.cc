#include "loader/finite_check.h"

#include <algorithm>
#include <tuple>

#include "loader/weight_store.h"
#include "util/check.h"

namespace nanovllm {
namespace {

// A float is NaN or Inf exactly when its exponent bits are all ones (IEEE 754 binary16/32,
// bfloat16). Scanned as unsigned integers: `any` ORs a per-block flag so the loop vectorizes,
// and only a block that has one is searched element by element.
template <class U>
std::optional<NonFinite> scan(const void* data, int64_t n, U exp_mask, U mantissa_mask) {
  const U* p = static_cast<const U*>(data);
  constexpr int64_t kBlock = 4096;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    bool any = false;
    for (int64_t i = b; i < e; ++i) any |= (p[i] & exp_mask) == exp_mask;
    if (!any) continue;
    for (int64_t i = b; i < e; ++i)
      if ((p[i] & exp_mask) == exp_mask) return NonFinite{i, (p[i] & mantissa_mask) != 0};
  }
  return std::nullopt;
}

}  // namespace

std::optional<NonFinite> find_nonfinite(const Tensor& t) {
  const int64_t n = t.numel();
  if (n == 0) return std::nullopt;
  switch (t.dtype()) {
    case DType::F32: return scan<uint32_t>(t.raw(), n, 0x7F800000u, 0x007FFFFFu);
    case DType::F16: return scan<uint16_t>(t.raw(), n, uint16_t(0x7C00), uint16_t(0x03FF));
    case DType::BF16: return scan<uint16_t>(t.raw(), n, uint16_t(0x7F80), uint16_t(0x007F));
    default: return std::nullopt;
  }
}

void check_finite_weights(const WeightStore& ws) {
  for (std::string name : ws.names()) {
    // A GPTQ / AWQ module's only floats are its scales (q - zero is a small integer).
    Tensor t;
    if (ws.int4() && ws.int4()->has(name)) std::tie(name, t) = ws.int4()->scales(name);
    else t = ws.get(name);
    if (auto bad = find_nonfinite(t))
      NV_THROW("tensor '", name, "' holds ", bad->is_nan ? "NaN" : "Inf", " at element ", bad->index, " (of ",
               t.numel(), "): the checkpoint is corrupt; pass --allow-nonfinite-weights to load it anyway");
  }
}

}  // namespace nanovllm
