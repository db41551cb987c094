// CPU sampling op (see kernels/sampling.h for the definition; kernels/cpu/sampling.h).
// Gumbel-max as an exponential race: token = argmax_i p_i / E_i with p_i = exp(z_i - zmax) and
// E_i = -log(u_i) the Philox noise; the CUDA sampler's argmax z_i + gumbel_i is the same token.
#include "kernels/cpu/sampling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/cpu/row_reduce.h"
#include "util/check.h"

namespace nanovllm::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline float clean(float v) { return std::isnan(v) ? kNegInf : v; }

// Lowest index of the maximum; NaN never wins. Returns 0 for an all -inf/NaN row.
int argmax(const float* x, int V) { return argmax_f32(x, V); }

// Step 4 of the definition: the allowed token with the largest raw logit, -inf included.
int fallback_token(const float* raw, int V, const uint32_t* mask) {
  int best = -1;
  float bv = kNegInf;
  for (int i = 0; i < V; ++i)
    if (token_allowed(mask, i) && (best < 0 || clean(raw[i]) > bv)) {
      bv = clean(raw[i]);
      best = i;
    }
  return best < 0 ? 0 : best;  // validation guarantees an allowed token
}

// Fills out->top (raw log_softmax, value desc then index asc) and returns the row's logsumexp.
double fill_logprobs(const float* row, int V, int num_top, TokenLogprobs* out) {
  const float m = max_f32(row, V);  // NaN skipped
  double sum = 0;
  if (std::isfinite(m))
    for (int i = 0; i < V; ++i)
      if (row[i] > kNegInf) sum += std::exp(static_cast<double>(row[i]) - m);
  const double lse = std::isfinite(m) ? m + std::log(sum) : 0.0;
  out->top.clear();
  const int n = std::min(num_top, V);
  if (n > 0) {
    thread_local std::vector<int> idx;
    idx.resize(static_cast<size_t>(V));
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int a, int b) {
      return clean(row[a]) != clean(row[b]) ? clean(row[a]) > clean(row[b]) : a < b;
    });
    for (int j = 0; j < n; ++j) {
      const int t = idx[static_cast<size_t>(j)];
      out->top.push_back({t, static_cast<float>(clean(row[t]) - lse)});
    }
  }
  return lse;
}

// Race over the whole vocabulary (no filter): argmax p_i / E_i, p_i = exp(x_i - m).
// Exact pruning keeps it cheap: token i can only win if p_i / E_i > best, and
// E_i = -log(u_i) >= 1 - u_i >= 2^-24. So a token whose logit is far below m + log(best) cannot
// win (no exp), and one with p_i <= best * (1 - u_i) cannot win either (no log); the 0.999 / 18
// margins absorb float rounding.
int race_all(const float* x, int V, float m, uint64_t seed, uint64_t step) {
  float best = 0.f, skip_below = kNegInf, log_best = kNegInf;
  int token = -1;
  auto visit = [&](int i) {
    if (x[i] < skip_below) return;
    const uint32_t w = sampler_noise_word(seed, step, static_cast<uint32_t>(i));
    const float u = noise_uniform(w);
    // floor(log2(1 - u)) from the float exponent: a lower bound of log(1 - u) / ln 2, so
    // x - m <= log(best) + that bound implies p_i <= best * (1 - u): skip, no exp.
    const int e2 = static_cast<int>((std::bit_cast<uint32_t>(1.0f - u) >> 23) & 0xff) - 127;
    if (x[i] - m <= log_best + static_cast<float>(e2) * 0.6931472f - 1e-3f) return;
    const float pi = std::exp(x[i] - m);
    if (!(pi > 0.f) || pi <= best * (1.0f - u) * 0.999f) return;
    const float s = pi / -std::log(u);
    if (s > best || (s == best && i < token)) {
      best = s;
      token = i;
      log_best = std::log(best);
      skip_below = m + log_best - 18.f;
    }
  };
  // Start with the most likely token (p = 1): it makes best large at once, so the bounds skip
  // almost every other token. It is visited again in order (no change then).
  // m is the row's maximum (sample_row), so its first index is one scan, not argmax's two.
  const int top = first_equal_f32(x, V, m);
  visit(top < V ? top : argmax(x, V));
  // Only tokens not below skip_below can win; it only rises, and visit() checks it again.
  for (int i = first_not_below(x, 0, V, skip_below); i < V; i = first_not_below(x, i + 1, V, skip_below))
    visit(i);
  return token < 0 ? argmax(x, V) : token;  // unreachable: the max token has p = 1
}

// Candidates of the kept set for top-k / top-p / min-p (definition step 3), into `cand`.
void filter_candidates(const float* x, int V, float m, const SamplingRow& p,
                       std::vector<int>& cand) {
  const bool top_k_on = p.top_k >= 1 && p.top_k < V;
  double total_all = -1;  // sum of exp(x - m) over the vocabulary, when needed
  cand.clear();
  if (top_k_on) {
    // k-th largest value (ties at it kept): one pass with a size-k min-heap (most tokens fail
    // the first comparison); nth_element on a copy for large k.
    thread_local std::vector<float> heap;
    heap.clear();
    float thr;
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
    // Candidates live in a window x >= m - W that provably contains the final set: enough mass
    // for the nucleus (top-p) or the min-p threshold. Widened until it does, so the common case
    // touches few tokens.
    const float minp_w = p.min_p > 0.f ? -std::log(p.min_p) : 0.f;
    for (float W = p.top_p >= 1.f ? minp_w + 1.f : 12.f;; W *= 2) {
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
  auto prob = [&](int i) { return static_cast<double>(std::exp(x[i] - m)); };
  if (p.top_p < 1.f && !cand.empty()) {
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
    // Threshold = the last kept value; every tie of it stays (the CUDA radix select's rule).
    const float thr = x[cand[std::max<size_t>(1, keep) - 1]];
    cand.erase(std::remove_if(cand.begin(), cand.end(), [&](int i) { return x[i] < thr; }),
               cand.end());
  }
  if (p.min_p > 0.f) {  // z >= zmax + log(min_p), in float like the CUDA sampler
    const float floor_z = m + std::log(p.min_p);
    cand.erase(std::remove_if(cand.begin(), cand.end(), [&](int i) { return x[i] < floor_z; }),
               cand.end());
  }
}

int sample_row(const float* raw, int V, const SamplingRow& p, TokenLogprobs* lp) {
  const bool want_lp = p.num_logprobs >= 0;
  const double lse = want_lp ? fill_logprobs(raw, V, p.num_logprobs, lp) : 0.0;
  auto finish = [&](int token) {
    if (want_lp) lp->logprob = static_cast<float>(static_cast<double>(clean(raw[token])) - lse);
    return token;
  };

  thread_local std::vector<LogitEdit> edits;
  edits.clear();
  build_logit_edits(p, V, edits);
  const uint32_t* mask = p.allowed.empty() ? nullptr : p.allowed.data();
  const bool greedy = p.greedy();
  if (greedy && edits.empty() && mask == nullptr) return finish(argmax(raw, V));  // no copy

  // Processed logits z (definition step 2).
  thread_local std::vector<float> buf;
  buf.resize(static_cast<size_t>(V));
  float* x = buf.data();
  for (int i = 0; i < V; ++i) x[i] = token_allowed(mask, i) ? clean(raw[i]) : kNegInf;
  for (const LogitEdit& e : edits) x[e.token] = apply_logit_edit(x[e.token], e, p.penalties);
  float m = max_f32(x, V);
  if (!(m > kNegInf)) return finish(fallback_token(raw, V, mask));
  if (greedy) return finish(argmax(x, V));

  const float inv_t = 1.0f / p.temperature;
  for (int i = 0; i < V; ++i) x[i] *= inv_t;
  m *= inv_t;  // exact: rounding is monotone, so max(x * c) == max(x) * c
  const bool filtered = (p.top_k >= 1 && p.top_k < V) || p.top_p < 1.f || p.min_p > 0.f;
  if (!filtered) return finish(race_all(x, V, m, p.seed, p.step));

  thread_local std::vector<int> cand;
  filter_candidates(x, V, m, p, cand);
  double best = -1;
  int token = cand.empty() ? argmax(x, V) : cand[0];  // the max always survives the filters
  for (int i : cand) {
    const double s = std::exp(static_cast<double>(x[i] - m)) /
                     sampler_exp_noise(p.seed, p.step, static_cast<uint32_t>(i));
    if (s > best || (s == best && i < token)) {
      best = s;
      token = i;
    }
  }
  return finish(token);
}

}  // namespace

SampleResult sample(const Tensor& logits, const SamplingBatch& batch, ThreadPool& pool) {
  NV_CHECK(logits.device() == Device::CPU && logits.dtype() == DType::F32 && logits.ndim() == 2,
           "sample: logits must be F32 [S, V] on the CPU, got ", logits.str());
  const int64_t S = logits.size(0), V = logits.size(1);
  validate_sampling_batch(batch, S, V);
  SampleResult res;
  res.tokens.assign(static_cast<size_t>(S), 0);
  res.logprobs.assign(static_cast<size_t>(S), TokenLogprobs{});
  const float* base = logits.data<float>();
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      res.tokens[static_cast<size_t>(r)] =
          sample_row(base + r * V, static_cast<int>(V), batch.rows[static_cast<size_t>(r)],
                     &res.logprobs[static_cast<size_t>(r)]);
  };
  if (S > 1)
    pool.parallel_for(S, run, 1);
  else
    run(0, S);
  return res;
}

}  // namespace nanovllm::cpu
