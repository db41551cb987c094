// Conformance cases of linear: shapes (decode GEMV, small and prefill-sized batches, odd K and N)
// x weight dtype (F32, BF16, F16) x output dtype (F32 logits, activation) x bias.
#include "conformance.h"

namespace nanovllm::conformance {
namespace {

void linear_case(Harness& hx, int64_t T, int64_t N, int64_t K, DType wdt, DType odt,
                 bool with_bias) {
  auto x = hx.random({T, K}, hx.act());
  auto w = hx.random({N, K}, wdt, -0.2f, 0.2f);
  auto b = hx.random({N}, wdt);  // biases are stored like their weights (Qwen2's q/k/v)
  Tensor out = hx.poisoned({T, N}, odt);
  hx.be.linear(x.t, w.t, with_bias ? &b.t : nullptr, out);
  std::vector<double> want(size_t(T * N));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double s = with_bias ? b.host[size_t(n)] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += double(x.host[size_t(t * K + k)]) * w.host[size_t(n * K + k)];
      want[size_t(t * N + n)] = s;
    }
  const Tol kind = wdt == DType::BF16 ? Tol::kLinearBf16Weights : Tol::kElementwise;
  EXPECT_LE(rel_err(hx.download(out), want), tolerance(hx.act(), kind));
}

}  // namespace

void add_linear_cases(std::vector<Case>& out, DType act) {
  // Outputs: F32 (logits) and the activation dtype (when that is not F32 too).
  std::vector<DType> outs = {DType::F32};
  if (act != DType::F32) outs.push_back(act);
  struct Shape3 {
    int64_t T, N, K;
  };
  // T = 1: decode GEMV (K not a multiple of 16: tails); 9: small batch; 33: prefill-sized
  // (oneDNN on CPU, K and N odd); 300 x 384 x 256: prefill GEMM; 5 x 1000 x 1024: lm-head-like.
  for (Shape3 s : {Shape3{1, 77, 200}, Shape3{9, 64, 96}, Shape3{33, 50, 131}})
    for (DType wdt : {DType::F32, DType::BF16, DType::F16})
      for (DType odt : outs)
        for (bool bias : {false, true}) {
          const std::string name = "linear_t" + std::to_string(s.T) + "_n" + std::to_string(s.N) +
                                   "_k" + std::to_string(s.K) + "_w" + dt_tag(wdt) +
                                   "_out_" + dt_tag(odt) + (bias ? "_bias" : "");
          out.push_back({name, false, [=](Harness& hx) {
                           linear_case(hx, s.T, s.N, s.K, wdt, odt, bias);
                         }});
        }
  // A prefill-sized bf16 GEMM (several cuBLASLt tiles in each direction).
  for (DType odt : outs)
    for (bool bias : {false, true})
      out.push_back({"linear_t300_n384_k256_wbf16_out_" + dt_tag(odt) + (bias ? "_bias" : ""),
                     false, [=](Harness& hx) {
                       linear_case(hx, 300, 384, 256, DType::BF16, odt, bias);
                     }});
  out.push_back({"linear_lm_head_t5_n1000_k1024_wbf16_out_f32", false,
                 [](Harness& hx) { linear_case(hx, 5, 1000, 1024, DType::BF16, DType::F32, false); }});
}

}  // namespace nanovllm::conformance
