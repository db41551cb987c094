#include "loader/tp_shard.h"

#include "loader/tensor_ops.h"

namespace nanovllm {

Tensor load_column_parallel(const WeightStore& ws, const std::vector<std::string>& names,
                            const std::vector<Shape>& expected, const TpInfo& tp) {
  NV_CHECK_EQ(names.size(), expected.size());
  std::vector<Tensor> parts;
  for (size_t i = 0; i < names.size(); ++i) {
    Tensor t = ws.get(names[i], expected[i]);
    if (tp.world > 1) {
      NV_CHECK_EQ(t.size(0) % tp.world, 0, "tensor '", names[i], "' rows not divisible by TP size");
      t = shard_dim(t, 0, tp.rank, tp.world);
    }
    parts.push_back(t);
  }
  if (parts.size() == 1) return parts[0];
  return concat_rows(parts);
}

Tensor load_row_parallel(const WeightStore& ws, const std::string& name, const Shape& expected,
                         const TpInfo& tp) {
  Tensor t = ws.get(name, expected);
  if (tp.world == 1) return t;
  NV_CHECK_EQ(t.size(1) % tp.world, 0, "tensor '", name, "' columns not divisible by TP size");
  return shard_dim(t, 1, tp.rank, tp.world);
}

Tensor load_replicated(const WeightStore& ws, const std::string& name, const Shape& expected) {
  return ws.get(name, expected);
}

}  // namespace nanovllm
