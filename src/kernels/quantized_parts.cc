// A fused linear weight whose parts keep their own quantized layouts (kernels/quantized.h).
#include "kernels/quantized.h"

#include "util/check.h"

namespace nanovllm {

QuantizedWeight join_quantized_columns(const std::vector<std::shared_ptr<const QuantizedWeight>>& parts) {
  NV_CHECK(!parts.empty(), "join_quantized_columns: no parts");
  QuantizedWeight w;
  for (const auto& p : parts) {
    NV_CHECK(p && p->scheme.enabled(), "join_quantized_columns: a part is not a quantized weight");
    NV_CHECK(p->x_features() == parts[0]->x_features(), "join_quantized_columns: a ", p->scheme.str(), " part of [",
             p->N, ", ", p->x_features(), "] and a ", parts[0]->scheme.str(), " part of [", parts[0]->N, ", ",
             parts[0]->x_features(), "] read different inputs");
    // Parts of parts: the flat list (one level, in column order).
    if (p->composite()) w.parts.insert(w.parts.end(), p->parts.begin(), p->parts.end());
    else w.parts.push_back(p);
    w.N += p->N;
  }
  w.scheme = w.parts[0]->scheme;
  w.K = w.Kp = parts[0]->x_features();
  w.Np = w.N;
  return w;
}

}  // namespace nanovllm
