#include "kernels/cpu/moe.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "util/check.h"

namespace nanovllm::cpu {

void moe_route(const Tensor& logits, int top_k, bool normalize, Tensor& ids, Tensor& weights,
               ThreadPool& pool) {
  const int64_t T = logits.size(0), E = logits.size(1);
  std::vector<float> rows;
  const float* lg = nullptr;
  if (logits.dtype() == DType::F32) {
    lg = logits.data<float>();
  } else {  // a BF16 / F16 router output: convert once (the softmax runs in F32, like HF's)
    rows.resize(size_t(T * E));
    convert_to_f32(logits.raw(), logits.dtype(), rows.data(), T * E);
    lg = rows.data();
  }
  int32_t* out_ids = ids.data<int32_t>();
  float* out_w = weights.data<float>();
  pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    std::vector<float> p(static_cast<size_t>(E));
    std::vector<int32_t> order(static_cast<size_t>(E));
    for (int64_t t = t0; t < t1; ++t) {
      const float* l = lg + t * E;
      const float mx = *std::max_element(l, l + E);
      double sum = 0;
      for (int64_t e = 0; e < E; ++e) sum += p[size_t(e)] = std::exp(l[e] - mx);
      const float inv = float(1.0 / sum);
      for (float& v : p) v *= inv;
      std::iota(order.begin(), order.end(), 0);
      // The k most probable, ties to the lower id (a total order: results never depend on the
      // partial sort's internals).
      std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
        return p[size_t(a)] > p[size_t(b)] || (p[size_t(a)] == p[size_t(b)] && a < b);
      });
      float s = 0;
      for (int j = 0; j < top_k; ++j) s += p[size_t(order[size_t(j)])];
      for (int j = 0; j < top_k; ++j) {
        out_ids[t * top_k + j] = order[size_t(j)];
        out_w[t * top_k + j] = normalize ? p[size_t(order[size_t(j)])] / s : p[size_t(order[size_t(j)])];
      }
    }
  }, 16);
}

void moe_experts(const Tensor& x, const MoeExperts& ex, const Tensor& ids, const Tensor& weights,
                 Tensor& out, ThreadPool& pool, const LinearFn& linear) {
  NV_CHECK(x.dtype() == DType::F32, "moe_experts: the CPU backend's activations are F32, got ", x.str());
  const int64_t T = x.size(0), H = ex.hidden, I = ex.intermediate, k = ids.size(1);
  const int64_t E = ex.num_experts();
  const int32_t* id = ids.data<int32_t>();
  const float* w = weights.data<float>();
  float* o = out.data<float>();
  std::memset(o, 0, size_t(T * H) * sizeof(float));
  if (T == 0) return;

  // Group the (token, slot) pairs by expert: a counting sort, pairs of an expert in token order.
  std::vector<int64_t> begin(static_cast<size_t>(E + 1), 0);
  for (int64_t i = 0; i < T * k; ++i)
    if (id[i] >= 0 && id[i] < E) ++begin[size_t(id[i]) + 1];
  std::partial_sum(begin.begin(), begin.end(), begin.begin());
  std::vector<int64_t> pairs(static_cast<size_t>(begin[size_t(E)]));
  std::vector<int64_t> fill(begin.begin(), begin.end() - 1);
  for (int64_t i = 0; i < T * k; ++i)
    if (id[i] >= 0 && id[i] < E) pairs[size_t(fill[size_t(id[i])]++)] = i;

  const float* xp = x.data<float>();
  const int64_t P = begin[size_t(E)];  // (token, slot) pairs routed to a valid expert
  // y[r] = expert(x[token of pairs[r]]): rows in pairs order (grouped by expert).
  std::vector<float> y(size_t(P * H));
  std::vector<int64_t> active;
  for (int64_t e = 0; e < E; ++e)
    if (begin[size_t(e) + 1] > begin[size_t(e)]) active.push_back(e);
  bool quantized = true;
  for (int64_t e : active) quantized = quantized && ex.gate_up[size_t(e)].quantized() && ex.down[size_t(e)].quantized();

  // One expert on `p`: its tokens' rows gathered, gate_up, SiLU * up, down, into y.
  auto run_expert = [&](int64_t e, ThreadPool& p) {
    const int64_t n = begin[size_t(e) + 1] - begin[size_t(e)];
    const int64_t* pe = pairs.data() + begin[size_t(e)];
    Tensor xe = Tensor::empty({n, H}, DType::F32);
    for (int64_t r = 0; r < n; ++r)
      std::memcpy(xe.data<float>() + r * H, xp + (pe[r] / k) * H, size_t(H) * sizeof(float));
    Tensor gate_up = Tensor::empty({n, 2 * I}, DType::F32);
    linear(xe, ex.gate_up[size_t(e)], gate_up, p);
    Tensor h = Tensor::empty({n, I}, DType::F32);
    silu_and_mul(gate_up, h, p);
    Tensor ye = Tensor::wrap(y.data() + begin[size_t(e)] * H, {n, H}, DType::F32);
    linear(h, ex.down[size_t(e)], ye, p);
  };
  const int threads = pool.size();
  if (threads > 1 && quantized && int64_t(active.size()) >= 2 * threads) {
    // Largest experts first, handed out through a counter: the threads finish together.
    std::stable_sort(active.begin(), active.end(), [&](int64_t a, int64_t b) {
      return begin[size_t(a) + 1] - begin[size_t(a)] > begin[size_t(b) + 1] - begin[size_t(b)];
    });
    std::atomic<size_t> next{0};
    pool.run_on_all([&](int) {
      thread_local ThreadPool single(1, 0, false);  // the linears inline on this thread
      for (size_t i; (i = next.fetch_add(1)) < active.size();) run_expert(active[i], single);
    });
  } else {
    for (int64_t e : active) run_expert(e, pool);
  }

  // out[t] = sum over its slots, in ascending expert order (as transformers' loop over experts),
  // of weight * y. row_of[t * k + j]: the y row of slot j of token t (-1: invalid expert).
  std::vector<int64_t> row_of(size_t(T * k), -1);
  for (int64_t r = 0; r < P; ++r) row_of[size_t(pairs[size_t(r)])] = r;
  pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    std::vector<int64_t> slots(static_cast<size_t>(k));
    for (int64_t t = t0; t < t1; ++t) {
      std::iota(slots.begin(), slots.end(), t * k);
      std::sort(slots.begin(), slots.end(), [&](int64_t a, int64_t b) { return id[a] < id[b] || (id[a] == id[b] && a < b); });
      float* dst = o + t * H;
      for (int64_t i : slots) {
        if (row_of[size_t(i)] < 0) continue;
        const float wr = w[i];
        const float* src = y.data() + row_of[size_t(i)] * H;
        for (int64_t c = 0; c < H; ++c) dst[c] += wr * src[c];
      }
    }
  }, grain_for_work(k * H, 16384));
}

}  // namespace nanovllm::cpu
