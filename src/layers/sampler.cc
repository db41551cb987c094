#include "layers/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "util/check.h"
#include "util/philox.h"
#include "util/thread_pool.h"

namespace nanovllm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Exp(1) noise for token i of a request step: -log(u), u in (0, 1) from Philox word i % 4 of
// counter (i / 4, step). Double precision so tiny u never rounds to 0 or 1.
inline double exp_noise_from_word(uint32_t w) {
  return -std::log((static_cast<double>(w) + 0.5) * (1.0 / 4294967296.0));
}

inline PhiloxCounter noise_counter(int64_t block, int64_t step) {
  return {static_cast<uint32_t>(block), static_cast<uint32_t>(static_cast<uint64_t>(block) >> 32),
          static_cast<uint32_t>(step), static_cast<uint32_t>(static_cast<uint64_t>(step) >> 32)};
}

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

  thread_local std::vector<float> buf;
  buf.assign(row, row + V);
  float* x = buf.data();
  for (int i = 0; i < V; ++i)
    if (std::isnan(x[i])) x[i] = kNegInf;
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
  } else if (p.temperature == 0.f) {
    token = argmax(x, V);
  } else {
    const float inv_t = 1.0f / p.temperature;
    for (int i = 0; i < V; ++i) x[i] *= inv_t;
    m *= inv_t;
    const PhiloxKey key = philox_key(req.seed);
    const bool top_k_on = p.top_k >= 1 && p.top_k < V;
    const bool filtered = top_k_on || p.top_p < 1.f || p.min_p > 0.f;
    if (!filtered) {
      // Race over the whole vocabulary: p_i / E_i with p_i = exp(x_i - m) (the softmax
      // normaliser does not change the argmax).
      double best = -1;
      token = 0;
      for (int b = 0; b * 4 < V; ++b) {
        const PhiloxCounter r = philox4x32_10(noise_counter(b, req.step), key);
        for (int l = 0; l < 4 && b * 4 + l < V; ++l) {
          const int i = b * 4 + l;
          if (!(x[i] > kNegInf)) continue;
          const double s = std::exp(static_cast<double>(x[i]) - m) / exp_noise_from_word(r[l]);
          if (s > best) {
            best = s;
            token = i;
          }
        }
      }
    } else {
      // Candidates: finite logits, then top-k (ties at the k-th value kept, like vLLM).
      thread_local std::vector<int> cand;
      cand.clear();
      float thr = kNegInf;
      if (top_k_on) {
        thread_local std::vector<float> tmp;
        tmp.assign(x, x + V);
        std::nth_element(tmp.begin(), tmp.begin() + (p.top_k - 1), tmp.end(), std::greater<>());
        thr = tmp[static_cast<size_t>(p.top_k - 1)];
      }
      for (int i = 0; i < V; ++i)
        if (x[i] > kNegInf && x[i] >= thr) cand.push_back(i);
      // Unnormalised probabilities relative to the max (which always survives).
      auto prob = [&](int i) { return std::exp(static_cast<double>(x[i]) - m); };
      if (p.top_p < 1.f) {
        double total = 0;
        for (int i : cand) total += prob(i);
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
        const PhiloxCounter r = philox4x32_10(noise_counter(i / 4, req.step), key);
        const double s = prob(i) / exp_noise_from_word(r[static_cast<size_t>(i % 4)]);
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
