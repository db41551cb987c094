// CudaBackend::sample: packs the batch (row parameters, merged LogitEdits, allowed masks) into
// the pinned staging buffer, one host->device copy, two kernel launches (sampler.cu), one
// device->host copy of tokens + logprobs. Only [S] tokens and the requested logprobs cross.
#include <cstring>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampler.h"

namespace nanovllm::cuda {
namespace {

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

SampleResult CudaBackend::sample(const Tensor& logits, const SamplingBatch& batch) {
  NV_CHECK(logits.device() == Device::CUDA && logits.dtype() == DType::F32 && logits.ndim() == 2,
           "sample: logits must be F32 [S, V] on the GPU, got ", logits.str());
  const int64_t S = logits.size(0), V = logits.size(1);
  validate_sampling_batch(batch, S, V);
  SampleResult res;
  res.tokens.assign(size_t(S), 0);
  res.logprobs.assign(size_t(S), TokenLogprobs{});
  if (S == 0) return res;

  // Host side (overlaps the forward still running on the stream).
  std::vector<SampleRowDev> rows(static_cast<size_t>(S));
  std::vector<LogitEdit> edits;
  std::vector<uint32_t> masks;
  int64_t num_top = 0;
  bool any_split = false;
  for (int64_t r = 0; r < S; ++r) {
    const SamplingRow& in = batch.rows[size_t(r)];
    SampleRowDev& d = rows[size_t(r)];
    d.temperature = in.temperature;
    d.top_k = in.top_k;
    d.top_p = in.top_p;
    d.min_p = in.min_p;
    d.seed = in.seed;
    d.step = in.step;
    d.penalties = in.penalties;
    d.num_logprobs = in.num_logprobs;
    d.lp_offset = int32_t(num_top);
    if (in.num_logprobs > 0) num_top += std::min<int64_t>(in.num_logprobs, V);
    d.edit_begin = int32_t(edits.size());
    d.edit_count = int32_t(build_logit_edits(in, V, edits));
    NV_CHECK(edits.size() < size_t(INT32_MAX), "sample: too many logit edits in one batch");
    if (!in.allowed.empty()) {
      d.mask_offset = int64_t(masks.size());
      masks.insert(masks.end(), in.allowed.begin(), in.allowed.end());
    }
    any_split = any_split || sample_split_row(d, V);
  }
  const size_t rows_b = align16(rows.size() * sizeof(SampleRowDev));
  const size_t edits_b = align16(edits.size() * sizeof(LogitEdit));
  const size_t masks_b = align16(masks.size() * sizeof(uint32_t));
  const size_t in_bytes = rows_b + edits_b + masks_b;
  // Outputs: tokens [S] I32, chosen logprob [S] F32, top ids [num_top] I32, top logprobs F32.
  const size_t tok_b = align16(size_t(S) * 4), lp_b = align16(size_t(S) * 4);
  const size_t top_b = align16(size_t(num_top) * 4);
  const size_t out_bytes = tok_b + lp_b + 2 * top_b;
  const size_t scratch_b = align16(sample_scratch_bytes(S, V));  // device only: never copied

  // The output region follows the input region, so reading the results back never races
  // the staging copy of the inputs.
  char* host = static_cast<char*>(pinned(in_bytes + out_bytes));
  std::memcpy(host, rows.data(), rows.size() * sizeof(SampleRowDev));
  if (!edits.empty()) std::memcpy(host + rows_b, edits.data(), edits.size() * sizeof(LogitEdit));
  if (!masks.empty())
    std::memcpy(host + rows_b + edits_b, masks.data(), masks.size() * sizeof(uint32_t));
  Tensor dev = empty({int64_t((in_bytes + out_bytes + scratch_b) / 4)}, DType::I32);
  char* d = static_cast<char*>(dev.raw());
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaMemcpyAsync(d, host, in_bytes, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaEventRecord(staged_, stream_));

  char* o = d + in_bytes;
  SampleOutputs out;
  out.tokens = reinterpret_cast<int32_t*>(o);
  out.chosen_logprob = reinterpret_cast<float*>(o + tok_b);
  out.top_ids = reinterpret_cast<int32_t*>(o + tok_b + lp_b);
  out.top_logprobs = reinterpret_cast<float*>(o + tok_b + lp_b + top_b);
  launch_sample(logits.data<float>(), S, V, reinterpret_cast<const SampleRowDev*>(d),
                reinterpret_cast<const LogitEdit*>(d + rows_b),
                reinterpret_cast<const uint32_t*>(d + rows_b + edits_b), out,
                d + in_bytes + out_bytes, any_split, stream_);
  char* ho = host + in_bytes;
  CUDA_CHECK(cudaMemcpyAsync(ho, o, out_bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));

  const auto* tokens = reinterpret_cast<const int32_t*>(ho);
  const auto* chosen = reinterpret_cast<const float*>(ho + tok_b);
  const auto* top_ids = reinterpret_cast<const int32_t*>(ho + tok_b + lp_b);
  const auto* top_lps = reinterpret_cast<const float*>(ho + tok_b + lp_b + top_b);
  for (int64_t r = 0; r < S; ++r) {
    res.tokens[size_t(r)] = tokens[r];
    const SampleRowDev& d_row = rows[size_t(r)];
    if (d_row.num_logprobs < 0) continue;
    TokenLogprobs& lp = res.logprobs[size_t(r)];
    lp.logprob = chosen[r];
    const int64_t n = std::min<int64_t>(d_row.num_logprobs, V);
    for (int64_t j = 0; j < n; ++j)
      lp.top.push_back({top_ids[d_row.lp_offset + j], top_lps[d_row.lp_offset + j]});
  }
  return res;
}

}  // namespace nanovllm::cuda
