// Conformance cases of the mixture-of-experts ops: moe_route (softmax top-k, ties, renorm) and
// moe_experts (grouped expert MLPs: a skipped slot, an expert shared by several tokens, unused
// experts), with F32 and BF16 expert weights.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "conformance.h"

namespace nanovllm::conformance {
namespace {

// Host tensor of random values rounded to dt, and the values (what prepare_moe_experts reads).
std::pair<Tensor, std::vector<float>> host_random(Harness& hx, const Shape& shape, DType dt, float lo, float hi) {
  Tensor t = Tensor::empty(shape, dt);
  std::vector<float> v(size_t(t.numel()));
  std::uniform_real_distribution<float> u(lo, hi);
  for (auto& x : v) x = float(round_to(dt, u(hx.rng())));
  convert_f32_to(v.data(), t.raw(), dt, t.numel());
  return {t, v};
}

// Reference router: softmax in f64 of the rounded logits, the top k with ties to the lower id.
void route_reference(const std::vector<float>& logits, int64_t T, int64_t E, int k, bool normalize,
                     std::vector<int32_t>& ids, std::vector<double>& w) {
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> p(static_cast<size_t>(E));
    double mx = -1e300, s = 0;
    for (int64_t e = 0; e < E; ++e) mx = std::max(mx, double(logits[size_t(t * E + e)]));
    for (int64_t e = 0; e < E; ++e) s += p[size_t(e)] = std::exp(double(logits[size_t(t * E + e)]) - mx);
    std::vector<int32_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
    double top = 0;
    for (int j = 0; j < k; ++j) top += p[size_t(order[size_t(j)])] / s;
    for (int j = 0; j < k; ++j) {
      ids.push_back(order[size_t(j)]);
      w.push_back(p[size_t(order[size_t(j)])] / s / (normalize ? top : 1.0));
    }
  }
}

void route_case(Harness& hx, const std::vector<float>& values, int64_t T, int64_t E, int k, bool normalize) {
  auto logits = hx.from(values, {T, E}, hx.act());
  Tensor ids = hx.poisoned({T, k}, DType::I32);
  Tensor w = hx.poisoned({T, k}, DType::F32);
  hx.be.moe_route(logits.t, k, normalize, ids, w);
  std::vector<int32_t> want_ids;
  std::vector<double> want_w;
  route_reference(logits.host, T, E, k, normalize, want_ids, want_w);
  Tensor got_ids = hx.be.to_host(ids);
  EXPECT_EQ(std::vector<int32_t>(got_ids.data<int32_t>(), got_ids.data<int32_t>() + T * k), want_ids);
  EXPECT_LE(rel_err(hx.download(w), want_w), 1e-5);
}

// Distinct logits (multiples of 1/4, exact in BF16) in a shuffled order per row: no near ties.
std::vector<float> distinct_logits(Harness& hx, int64_t T, int64_t E) {
  std::vector<float> v;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> row(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) row[size_t(e)] = 0.25f * float(e) - 1.f;
    std::shuffle(row.begin(), row.end(), hx.rng());
    v.insert(v.end(), row.begin(), row.end());
  }
  return v;
}

// ids [T, k] may hold -1 (a skipped slot) and ids >= E (out of range): both contribute nothing.
void experts_case(Harness& hx, DType wdt, int64_t T, int64_t H, int64_t I, int64_t E, int k,
                  const std::vector<int32_t>& id_v) {
  auto x = hx.random({T, H}, hx.act());
  std::vector<std::vector<float>> gu(E), dn(E);
  MoeExperts ex = hx.be.prepare_moe_experts(E, H, I, [&](int64_t e) {
    auto [g, gv] = host_random(hx, {2 * I, H}, wdt, -0.3f, 0.3f);
    auto [d, dv] = host_random(hx, {H, I}, wdt, -0.3f, 0.3f);
    gu[size_t(e)] = gv;
    dn[size_t(e)] = dv;
    return std::pair{g, d};
  }, QuantScheme{});
  Tensor ids = hx.upload(Tensor::wrap(const_cast<int32_t*>(id_v.data()), {T, k}, DType::I32));
  auto w = hx.random({T, k}, DType::F32, 0.f, 1.f);
  Tensor out = hx.poisoned({T, H}, hx.act());
  hx.be.moe_experts(x.t, ex, ids, w.t, out);
  std::vector<double> want(size_t(T * H), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int j = 0; j < k; ++j) {
      const int32_t e = id_v[size_t(t * k + j)];
      if (e < 0 || e >= E) continue;
      std::vector<double> h(static_cast<size_t>(I));
      for (int64_t i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (int64_t c = 0; c < H; ++c) {
          g += double(gu[size_t(e)][size_t(i * H + c)]) * x.host[size_t(t * H + c)];
          u += double(gu[size_t(e)][size_t((I + i) * H + c)]) * x.host[size_t(t * H + c)];
        }
        h[size_t(i)] = g / (1 + std::exp(-g)) * u;
      }
      for (int64_t r = 0; r < H; ++r) {
        double y = 0;
        for (int64_t i = 0; i < I; ++i) y += double(dn[size_t(e)][size_t(r * I + i)]) * h[size_t(i)];
        want[size_t(t * H + r)] += w.host[size_t(t * k + j)] * y;
      }
    }
  // BF16 activations (CUDA) round gate_up and the SiLU product to BF16 like a bf16 model.
  const Tol kind = hx.act() != DType::F32 ? Tol::kAttention
                   : wdt == DType::BF16  ? Tol::kLinearBf16Weights
                                         : Tol::kElementwise;
  EXPECT_LE(rel_err(hx.download(out), want), tolerance(hx.act(), kind));
}

}  // namespace

void add_moe_cases(std::vector<Case>& out) {
  for (bool norm : {false, true}) {
    const std::string tag = norm ? "_norm" : "";
    out.push_back({"moe_route_t7_e10_k3" + tag, false, [=](Harness& hx) {
                     route_case(hx, distinct_logits(hx, 7, 10), 7, 10, 3, norm);
                   }});
    // 64 experts, top 8 (two warps' worth of lanes per row on CUDA), 33 rows.
    out.push_back({"moe_route_t33_e64_k8" + tag, false, [=](Harness& hx) {
                     route_case(hx, distinct_logits(hx, 33, 64), 33, 64, 8, norm);
                   }});
  }
  // Equal logits: the lower expert id first.
  out.push_back({"moe_route_ties", false, [](Harness& hx) {
                   route_case(hx, {0.5f, 1.f, 1.f, 0.5f, 1.f, 0.f, 0.f, 0.f, 0.f, 0.f}, 2, 5, 3, true);
                 }});
  out.push_back({"moe_route_k_equals_e", false, [](Harness& hx) {
                   route_case(hx, {0.25f, -1.f, 2.f, 0.f}, 1, 4, 4, false);
                 }});
  // Expert 1 serves four slots, expert 3 none, one slot skipped (-1) and one out of range (9).
  const std::vector<int32_t> few = {1, 0, 1, 4, 2, 1, -1, 1, 0, 4, 9, 2};
  for (DType wdt : {DType::F32, DType::BF16})
    out.push_back({"moe_experts_t6_h40_i24_e5_k2_w" + dt_tag(wdt), false,
                   [=](Harness& hx) { experts_case(hx, wdt, 6, 40, 24, 5, 2, few); }});
  // More (token, expert) pairs than one CUDA grid dimension holds (65,535): 16,400 tokens x 4,
  // as a prefill chunk of max_num_batched_tokens 16,384 with top-4 routing makes. The first GPU
  // run of the MoE path (2026-11-30, H200) refused it at the engine's warm-up.
  out.push_back({"moe_experts_t16400_k4_many_pairs", false, [](Harness& hx) {
                   const int64_t T = 16400, E = 5;
                   const int k = 4;
                   std::vector<int32_t> ids(size_t(T * k));
                   for (size_t p = 0; p < ids.size(); ++p) ids[p] = int32_t((p * 7 + p / 5) % (E + 2)) - 1;
                   experts_case(hx, DType::BF16, T, 16, 8, E, k, ids);
                 }});
  out.push_back({"moe_route_error_top_k", false, [](Harness& hx) {
                   auto logits = hx.random({2, 4}, hx.act());
                   Tensor ids = hx.poisoned({2, 5}, DType::I32), w = hx.poisoned({2, 5}, DType::F32);
                   expect_error([&] { hx.be.moe_route(logits.t, 5, true, ids, w); }, "top_k 5 must be in [1, 4]");
                 }});
  out.push_back({"moe_experts_error_ids_shape", false, [](Harness& hx) {
                   auto x = hx.random({3, 8}, hx.act());
                   MoeExperts ex = hx.be.prepare_moe_experts(2, 8, 4, [&](int64_t) {
                     return std::pair{Tensor::zeros({8, 8}, DType::F32), Tensor::zeros({8, 4}, DType::F32)};
                   }, QuantScheme{});
                   Tensor ids = hx.poisoned({2, 2}, DType::I32);
                   auto w = hx.random({2, 2}, DType::F32);
                   Tensor out = hx.poisoned({3, 8}, hx.act());
                   expect_error([&] { hx.be.moe_experts(x.t, ex, ids, w.t, out); }, "moe_experts: ids");
                 }});
}

}  // namespace nanovllm::conformance
