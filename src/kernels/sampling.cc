// Host-side checks and edit merging of the sampling op (kernels/sampling.h), shared by both
// backends so bad inputs fail the same way on each.
#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"

namespace nanovllm {
namespace {

void validate_row(const SamplingRow& row, size_t r, int64_t V) {
  auto bad = [&](auto&&... msg) { NV_THROW("sampling row ", r, ": ", msg...); };
  if (std::isnan(row.temperature) || row.temperature < 0.f || std::isinf(row.temperature))
    bad("temperature must be finite and >= 0, got ", row.temperature);
  if (row.top_k < -1) bad("top_k must be -1, 0 (off) or >= 1, got ", row.top_k);
  if (!(row.top_p > 0.f && row.top_p <= 1.f)) bad("top_p must be in (0, 1], got ", row.top_p);
  if (!(row.min_p >= 0.f && row.min_p <= 1.f)) bad("min_p must be in [0, 1], got ", row.min_p);
  if (row.num_logprobs < -1 || row.num_logprobs > kMaxLogprobs)
    bad("num_logprobs must be in [-1, ", kMaxLogprobs, "], got ", row.num_logprobs);
  const Penalties& p = row.penalties;
  if (!std::isfinite(p.presence) || !std::isfinite(p.frequency))
    bad("presence / frequency penalties must be finite, got ", p.presence, " / ", p.frequency);
  if (!(std::isfinite(p.repetition) && p.repetition > 0.f))
    bad("repetition_penalty must be finite and > 0, got ", p.repetition);

  // Strictly ascending token ids: unique, and the CUDA sampler binary-searches the merged edits.
  for (size_t j = 0; j < row.history.size(); ++j) {
    const TokenCount& h = row.history[j];
    if (h.token < 0 || h.token >= V) bad("history token ", h.token, " is outside [0, ", V, ")");
    if (h.count < 0) bad("history count of token ", h.token, " is negative: ", h.count);
    if (j > 0 && row.history[j - 1].token >= h.token)
      bad("history must be sorted by token id without repeats; ", row.history[j - 1].token,
          " comes before ", h.token);
  }
  for (size_t j = 0; j < row.logit_bias.size(); ++j) {
    const TokenBias& b = row.logit_bias[j];
    if (b.token < 0 || b.token >= V) bad("logit_bias token ", b.token, " is outside [0, ", V, ")");
    if (!std::isfinite(b.bias)) bad("logit_bias of token ", b.token, " is not finite: ", b.bias);
    if (j > 0 && row.logit_bias[j - 1].token >= b.token)
      bad("logit_bias must be sorted by token id without repeats; ", row.logit_bias[j - 1].token,
          " comes before ", b.token);
  }
  if (!row.allowed.empty()) {
    const int64_t words = (V + 31) / 32;
    if (int64_t(row.allowed.size()) != words)
      bad("allowed-token mask has ", row.allowed.size(), " words; vocabulary ", V, " needs ",
          words);
    bool any = false;
    for (int64_t w = 0; w < words && !any; ++w) {
      uint32_t bits = row.allowed[size_t(w)];
      if (w == words - 1 && V % 32 != 0) bits &= (1u << (V % 32)) - 1u;  // ignore bits >= V
      any = bits != 0;
    }
    if (!any) bad("allowed-token mask allows no token");
  }
}

}  // namespace

void validate_sampling_batch(const SamplingBatch& batch, int64_t S, int64_t V) {
  NV_CHECK(V > 0 && V < (int64_t(1) << 31), "sample: vocabulary size (logits columns) ", V,
           " must be in [1, 2^31)");
  NV_CHECK(int64_t(batch.rows.size()) == S, "sample: ", batch.rows.size(),
           " sampling rows for ", S, " logits rows (one row of parameters per logits row)");
  for (size_t r = 0; r < batch.rows.size(); ++r) validate_row(batch.rows[r], r, V);
}

size_t build_logit_edits(const SamplingRow& row, int64_t V, std::vector<LogitEdit>& out) {
  const size_t first = out.size();
  // Suppressed ids: short, any order, repeats allowed; ids outside [0, V) cannot be sampled
  // anyway (a model's EOS id may lie past its logits) and are dropped.
  thread_local std::vector<int32_t> sup;
  sup.clear();
  for (int32_t id : row.suppress)
    if (id >= 0 && id < V) sup.push_back(id);
  std::sort(sup.begin(), sup.end());
  sup.erase(std::unique(sup.begin(), sup.end()), sup.end());
  // Three-way merge of ascending lists -> ascending edits, one per token.
  const std::span<const TokenCount> hist =
      row.has_penalties() ? row.history : std::span<const TokenCount>();
  size_t a = 0, b = 0, c = 0;
  constexpr int32_t kEnd = INT32_MAX;
  while (a < sup.size() || b < row.logit_bias.size() || c < hist.size()) {
    const int32_t ta = a < sup.size() ? sup[a] : kEnd;
    const int32_t tb = b < row.logit_bias.size() ? row.logit_bias[b].token : kEnd;
    const int32_t tc = c < hist.size() ? hist[c].token : kEnd;
    LogitEdit e;
    e.token = std::min({ta, tb, tc});
    if (ta == e.token) {
      e.flags |= kEditSuppress;
      ++a;
    }
    if (tb == e.token) e.bias = row.logit_bias[b++].bias;
    if (tc == e.token) {
      e.flags |= kEditSeen;
      e.count = hist[c++].count;
    }
    out.push_back(e);
  }
  return out.size() - first;
}

}  // namespace nanovllm
