#include "layers/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "util/check.h"
#include "util/philox.h"
#include "util/thread_pool.h"

namespace nanovllm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Exp(1) noise of token i: E = -log(u), u = noise_uniform(sampler_noise_word(seed, step, i))
// (see util/philox.h). argmax p_i / E_i equals argmax (z_i + Gumbel_i) with Gumbel = -log(E),
// the CUDA sampler's form, so both backends pick the same token from the same logits.
inline float exp_noise_from_word(uint32_t w) { return -std::log(noise_uniform(w)); }

// Lowest index of the maximum; NaN never wins. Returns 0 for an all -inf/NaN row.
int argmax(const float* x, int V) {
  int best = 0;
  float bv = kNegInf;
  for (int i = 0; i < V; ++i)
    if (x[i] > bv) {
      bv = x[i];
      best = i;
    }
  return best;
}

// Fills out->top and returns log(sum(exp(row))) for the sampled token's logprob.
double fill_logprobs(const float* row, int V, int num_top, TokenLogprobs* out) {
  float m = kNegInf;
  for (int i = 0; i < V; ++i) m = std::max(m, row[i]);  // NaN-safe: comparisons with NaN fail
  double sum = 0;
  if (std::isfinite(m))
    for (int i = 0; i < V; ++i)
      if (row[i] > kNegInf) sum += std::exp(static_cast<double>(row[i]) - m);
  const double lse = std::isfinite(m) ? m + std::log(sum) : 0.0;
  out->top.clear();
  const int n = std::min(num_top, V);
  if (n > 0) {
    std::vector<int> idx(static_cast<size_t>(V));
    std::iota(idx.begin(), idx.end(), 0);
    auto key = [&](int i) { return std::isnan(row[i]) ? kNegInf : row[i]; };
    std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int a, int b) {
      return key(a) != key(b) ? key(a) > key(b) : a < b;
    });
    for (int j = 0; j < n; ++j)
      out->top.push_back({idx[static_cast<size_t>(j)],
                          static_cast<float>(key(idx[static_cast<size_t>(j)]) - lse)});
  }
  return lse;
}

}  // namespace

int sample_row(const float* row, int V, const SampleRequest& req, TokenLogprobs* logprobs_out) {
  NV_CHECK(req.params != nullptr, "SampleRequest without params");
  NV_CHECK_GT(V, 0);
  const SamplingParams& p = *req.params;
  const bool want_lp = logprobs_out != nullptr && p.logprobs >= 0;
  double lse = 0;
  if (want_lp) lse = fill_logprobs(row, V, p.logprobs, logprobs_out);

  // Like vLLM, temperatures below 1e-5 are greedy (1/T would overflow the scaled logits).
  const bool greedy = p.temperature < 1e-5f;
  if (greedy && !req.suppress_eos) {  // fast path: no copy needed
    const int token = argmax(row, V);
    if (want_lp)
      logprobs_out->logprob = static_cast<float>(static_cast<double>(row[token]) - lse);
    return token;
  }
  thread_local std::vector<float> buf;
  buf.resize(static_cast<size_t>(V));
  float* x = buf.data();
  for (int i = 0; i < V; ++i) x[i] = std::isnan(row[i]) ? kNegInf : row[i];
  if (req.suppress_eos) {
    auto mask = [&](const std::vector<int>& ids) {
      for (int id : ids)
        if (id >= 0 && id < V) x[id] = kNegInf;
    };
    if (req.eos_ids) mask(*req.eos_ids);
    mask(p.stop_token_ids);
  }

  int token;
  float m = kNegInf;
  for (int i = 0; i < V; ++i) m = std::max(m, x[i]);
  if (!(m > kNegInf)) {
    token = argmax(row, V);  // everything masked: ignore the suppression rather than fail
  } else if (greedy) {
    token = argmax(x, V);
  } else {
    const float inv_t = 1.0f / p.temperature;
    for (int i = 0; i < V; ++i) x[i] *= inv_t;
    m *= inv_t;
    const bool top_k_on = p.top_k >= 1 && p.top_k < V;
    const bool filtered = top_k_on || p.top_p < 1.f || p.min_p > 0.f;
    if (!filtered) {
      // Race over the whole vocabulary: p_i / E_i with p_i = exp(x_i - m) (the softmax
      // normaliser does not change the argmax).
      // Exact pruning keeps this cheap: token i can only win if p_i / E_i > best, and
      // E_i = -log(u_i) >= 1 - u_i >= 2^-24. So a token whose logit is far below
      // m + log(best) cannot win (no exp), and one with p_i <= best * (1 - u_i) cannot win
      // either (no log); the 0.999 / 18 margins absorb float rounding.
      float best = 0.f;
      float skip_below = kNegInf;  // m + log(best) - 18
      float log_best = kNegInf;
      token = -1;
      // Start with the most likely token (p = 1): it makes best large at once, so the bounds
      // below skip almost every other token. It is visited again in order (no change then).
      const int top = argmax(x, V);
      auto visit = [&](int i) {
        if (x[i] < skip_below) return;
        const uint32_t w = sampler_noise_word(req.seed, static_cast<uint64_t>(req.step),
                                              static_cast<uint32_t>(i));
        const float u = noise_uniform(w);
        // floor(log2(1 - u)) from the float exponent: a lower bound of log(1 - u) / ln 2, so
        // x - m <= log(best) + that bound implies p_i <= best * (1 - u): skip, no exp.
        const int e2 = static_cast<int>((std::bit_cast<uint32_t>(1.0f - u) >> 23) & 0xff) - 127;
        if (x[i] - m <= log_best + static_cast<float>(e2) * 0.6931472f - 1e-3f) return;
        const float pi = std::exp(x[i] - m);
        if (!(pi > 0.f) || pi <= best * (1.0f - u) * 0.999f) return;
        const float s = pi / exp_noise_from_word(w);
        if (s > best || (s == best && i < token)) {
          best = s;
          token = i;
          log_best = std::log(best);
          skip_below = m + log_best - 18.f;
        }
      };
      visit(top);
      for (int i = 0; i < V; ++i) visit(i);
      if (token < 0) token = argmax(x, V);  // unreachable: the max token has p = 1
    } else {
      thread_local std::vector<int> cand;
      float thr = kNegInf;    // top-k threshold (ties at the k-th value kept, like vLLM)
      double total_all = -1;  // sum of exp(x - m) over the vocabulary, when needed
      cand.clear();
      if (top_k_on) {
        // k-th largest value: one pass with a size-k min-heap (most tokens fail the first
        // comparison); nth_element on a copy for large k.
        thread_local std::vector<float> heap;
        heap.clear();
        if (p.top_k <= 4096) {
          for (int i = 0; i < V; ++i) {
            if (static_cast<int>(heap.size()) < p.top_k) {
              heap.push_back(x[i]);
              std::push_heap(heap.begin(), heap.end(), std::greater<>());
            } else if (x[i] > heap.front()) {
              std::pop_heap(heap.begin(), heap.end(), std::greater<>());
              heap.back() = x[i];
              std::push_heap(heap.begin(), heap.end(), std::greater<>());
            }
          }
          thr = heap.front();
        } else {
          heap.assign(x, x + V);
          std::nth_element(heap.begin(), heap.begin() + (p.top_k - 1), heap.end(), std::greater<>());
          thr = heap[static_cast<size_t>(p.top_k - 1)];
        }
        for (int i = 0; i < V; ++i)
          if (x[i] > kNegInf && x[i] >= thr) cand.push_back(i);
      } else {
        // Candidates live in a window x >= m - W that provably contains the final set: enough
        // mass for the nucleus (top-p) or the min-p threshold. Widened until it does, so the
        // common case touches few tokens.
        const float minp_w = p.min_p > 0.f ? -std::log(p.min_p) : 0.f;
        for (float W = p.top_p >= 1.f ? minp_w : 12.f;; W *= 2) {
          const bool all = W > 200.f;
          const float t = all ? kNegInf : m - W;
          cand.clear();
          for (int i = 0; i < V; ++i)
            if (x[i] > kNegInf && x[i] >= t) cand.push_back(i);
          if (all || p.top_p >= 1.f) break;
          double in_window = 0;
          for (int i : cand) in_window += std::exp(x[i] - m);
          if (total_all < 0) {
            total_all = 0;
            for (int i = 0; i < V; ++i) total_all += std::exp(x[i] - m);
          }
          if (in_window >= static_cast<double>(p.top_p) * total_all * (1 - 1e-6)) break;
        }
      }
      // Unnormalised probabilities relative to the max (which always survives).
      auto prob = [&](int i) { return static_cast<double>(std::exp(x[i] - m)); };
      if (p.top_p < 1.f) {
        double total = 0;
        if (top_k_on || total_all < 0) {
          for (int i : cand) total += prob(i);
        } else {
          total = total_all;
        }
        const double target = static_cast<double>(p.top_p) * total;
        auto by_prob = [&](int a, int b) { return x[a] != x[b] ? x[a] > x[b] : a < b; };
        // Sort only a growing prefix: the nucleus is usually tiny compared with V.
        size_t sorted = 0, keep = cand.size();
        for (size_t want = std::min<size_t>(64, cand.size());; want = std::min(cand.size(), want * 4)) {
          std::partial_sort(cand.begin() + static_cast<std::ptrdiff_t>(sorted),
                            cand.begin() + static_cast<std::ptrdiff_t>(want), cand.end(), by_prob);
          double cum = 0;
          bool done = false;
          for (size_t j = 0; j < want; ++j) {
            cum += prob(cand[j]);
            if (cum >= target) {
              keep = j + 1;
              done = true;
              break;
            }
          }
          sorted = want;
          if (done || want == cand.size()) break;
        }
        cand.resize(std::max<size_t>(1, keep));
      }
      if (p.min_p > 0.f) {
        const double floor_p = static_cast<double>(p.min_p);  // relative to the max prob (=1)
        cand.erase(std::remove_if(cand.begin(), cand.end(),
                                  [&](int i) { return prob(i) < floor_p; }),
                   cand.end());
      }
      double best = -1;
      token = cand.empty() ? argmax(x, V) : cand[0];
      for (int i : cand) {
        const uint32_t w = sampler_noise_word(req.seed, static_cast<uint64_t>(req.step),
                                              static_cast<uint32_t>(i));
        const double s = prob(i) / exp_noise_from_word(w);
        if (s > best || (s == best && i < token)) {
          best = s;
          token = i;
        }
      }
    }
  }

  if (want_lp) {
    const float v = std::isnan(row[token]) ? kNegInf : row[token];
    logprobs_out->logprob = static_cast<float>(static_cast<double>(v) - lse);
  }
  return token;
}

std::vector<int> sample(const float* logits, int S, int V, const std::vector<SampleRequest>& reqs,
                        ThreadPool* pool, std::vector<TokenLogprobs>* logprobs_out) {
  NV_CHECK_EQ(static_cast<int>(reqs.size()), S, "one SampleRequest per logits row");
  std::vector<int> tokens(static_cast<size_t>(S));
  if (logprobs_out) logprobs_out->assign(static_cast<size_t>(S), TokenLogprobs{});
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s)
      tokens[static_cast<size_t>(s)] =
          sample_row(logits + s * static_cast<int64_t>(V), V, reqs[static_cast<size_t>(s)],
                     logprobs_out ? &(*logprobs_out)[static_cast<size_t>(s)] : nullptr);
  };
  if (pool != nullptr && S > 1)
    pool->parallel_for(S, run, 1);
  else
    run(0, S);
  return tokens;
}

}  // namespace nanovllm
