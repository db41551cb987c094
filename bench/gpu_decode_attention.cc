// Decode attention (one query per sequence over a paged KV cache) against the device-memory
// bandwidth measured in the same run, for both decode kernels (CudaBackend::DecodeImpl v1 =
// attention_decode.cu, v2 = attention_decode_v2.cu), so the faster one can be made the default.
//
//   bench_gpu_decode_attention [--json] [--rounds N]
//
// Bytes counted: the K and V rows each sequence attends to, read once (B x L x Hkv x D x 2
// tensors x 2 bytes); q, the output and the block tables are < 1% of that. GB/s = bytes / time.
// The ceiling: a read pass (bench/gpu_kernels.cu: 16-byte loads, 4 in flight per thread) over
// the same number of bytes, timed in rounds alternating with the two kernels (so all three see
// the same clocks); ratio = read-pass time / attention time, medians over rounds. Also reported:
// a device-to-device cudaMemcpy (bytes read + written) and the datasheet bandwidth from the
// clocks. Before timing, each kernel is checked against a float64 reference on two sequences
// (max |out - ref| / max |ref| <= 2e-2, bf16 output) with the output poisoned (NaN) first.
//
// JSON: one row per case with the shared fields (B, L, heads, kv_bytes, read_pass_gbs), then
// "v1" and "v2" objects (attention_us, attention_gbs, ratio_vs_read_pass, ratio_vs_spec,
// max_rel_err, finite, correct) and v2_speedup = v1 time / v2 time. "headline" is the first
// case (Qwen3-0.6B, B = 256, L = 1024); "batch_sweep" the Qwen3-0.6B cases at L = 1024.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu_kernels.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "util/dtype.h"

using namespace nanovllm;
using namespace nanovllm::benchgpu;

namespace {

struct Case {
  int B, L, Hq, Hkv, D, block_size;
};

// Qwen3-0.6B's attention shape (16 q heads, 8 KV heads, head_dim 128) at the bench.py
// workload's batch (256) and typical contexts, plus other GQA ratios / head_dims / block sizes,
// then the same shape at L = 1024 over batch sizes where few blocks per SM exist (1 .. 115).
const Case kCases[] = {
    {256, 1024, 16, 8, 128, 256}, {256, 512, 16, 8, 128, 256}, {64, 4096, 16, 8, 128, 256},
    {256, 1024, 32, 8, 128, 256}, {256, 1024, 16, 8, 64, 256},  {256, 1024, 16, 8, 128, 16},
    {1, 1024, 16, 8, 128, 256},   {8, 1024, 16, 8, 128, 256},   {33, 1024, 16, 8, 128, 256},
    {64, 1024, 16, 8, 128, 256},  {115, 1024, 16, 8, 128, 256},
};

using Impl = cuda::CudaBackend::DecodeImpl;
const std::pair<Impl, const char*> kImpls[] = {{Impl::kV1, "v1"}, {Impl::kV2, "v2"}};

std::vector<float> to_host_f32(cuda::CudaBackend& be, const void* p, int64_t n) {
  std::vector<uint16_t> raw(static_cast<size_t>(n));
  be.synchronize();
  CUDA_CHECK(cudaMemcpy(raw.data(), p, size_t(n) * 2, cudaMemcpyDeviceToHost));
  std::vector<float> f(static_cast<size_t>(n));
  convert_to_f32(raw.data(), DType::BF16, f.data(), n);
  return f;
}

// max |out - ref| / max |ref| over sequences {0, B-1}, all heads; false if any output is NaN.
double check_against_reference(cuda::CudaBackend& be, const Case& c, const Tensor& qkv,
                               const Tensor& kc, const Tensor& vc, const Tensor& out,
                               const std::vector<int32_t>& tables, int stride, bool* finite) {
  const int64_t row = int64_t(c.Hkv) * c.D, qkv_w = int64_t(c.Hq + 2 * c.Hkv) * c.D;
  double max_err = 0, max_ref = 0;
  *finite = true;
  for (int b : {0, c.B - 1}) {
    std::vector<float> q = to_host_f32(be, static_cast<uint16_t*>(qkv.raw()) + b * qkv_w, c.Hq * c.D);
    std::vector<float> o = to_host_f32(be, static_cast<uint16_t*>(out.raw()) + int64_t(b) * c.Hq * c.D,
                                       c.Hq * c.D);
    std::vector<float> K(size_t(c.L) * row), V(size_t(c.L) * row);
    for (int j0 = 0; j0 < c.L; j0 += c.block_size) {  // one copy per block of this sequence
      const int64_t slot0 = int64_t(tables[size_t(b) * stride + j0 / c.block_size]) * c.block_size;
      const int n = std::min(c.block_size, c.L - j0);
      auto k = to_host_f32(be, static_cast<uint16_t*>(kc.raw()) + slot0 * row, n * row);
      auto v = to_host_f32(be, static_cast<uint16_t*>(vc.raw()) + slot0 * row, n * row);
      std::copy(k.begin(), k.end(), K.begin() + int64_t(j0) * row);
      std::copy(v.begin(), v.end(), V.begin() + int64_t(j0) * row);
    }
    const double scale = 1.0 / std::sqrt(double(c.D));
    for (int h = 0; h < c.Hq; ++h) {
      const int g = h / (c.Hq / c.Hkv);
      std::vector<double> s(size_t(c.L));
      double mx = -1e300;
      for (int j = 0; j < c.L; ++j) {
        double acc = 0;
        for (int d = 0; d < c.D; ++d) acc += double(q[size_t(h) * c.D + d]) * K[size_t(j) * row + g * c.D + d];
        s[size_t(j)] = acc * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      double den = 0;
      for (auto& x : s) den += (x = std::exp(x - mx));
      for (int d = 0; d < c.D; ++d) {
        double ref = 0;
        for (int j = 0; j < c.L; ++j) ref += s[size_t(j)] * V[size_t(j) * row + g * c.D + d];
        ref /= den;
        const float got = o[size_t(h) * c.D + d];
        if (!std::isfinite(got)) *finite = false;
        max_err = std::max(max_err, std::abs(double(got) - ref));
        max_ref = std::max(max_ref, std::abs(ref));
      }
    }
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

nlohmann::json run_case(cuda::CudaBackend& be, const Case& c, const Tensor& read_buf,
                        uint32_t* sink, int rounds) {
  cudaStream_t s = be.stream();
  const int stride = (c.L + c.block_size - 1) / c.block_size;
  const int64_t num_blocks = int64_t(c.B) * stride, num_slots = num_blocks * c.block_size;
  Tensor kc = be.empty({num_slots, c.Hkv, c.D}, DType::BF16);
  Tensor vc = be.empty({num_slots, c.Hkv, c.D}, DType::BF16);
  Tensor qkv = be.empty({c.B, int64_t(c.Hq + 2 * c.Hkv) * c.D}, DType::BF16);
  Tensor out = be.empty({c.B, int64_t(c.Hq) * c.D}, DType::BF16);
  launch_fill_bf16(kc.raw(), kc.numel(), 1, 1.f, s);
  launch_fill_bf16(vc.raw(), vc.numel(), 2, 1.f, s);
  launch_fill_bf16(qkv.raw(), qkv.numel(), 3, 1.f, s);

  HostBatch hb;  // every sequence decodes its L-th token; blocks scattered over the cache
  hb.num_seqs = hb.num_tokens = c.B;
  hb.block_size = c.block_size;
  hb.block_table_stride = stride;
  hb.max_seqlen_q = 1;
  hb.max_seqlen_k = c.L;
  hb.decode_only = true;
  hb.block_tables.resize(size_t(num_blocks));
  std::iota(hb.block_tables.begin(), hb.block_tables.end(), 0);
  std::shuffle(hb.block_tables.begin(), hb.block_tables.end(), std::mt19937(7));
  for (int b = 0; b < c.B; ++b) {
    hb.input_ids.push_back(0);
    hb.positions.push_back(c.L - 1);
    hb.slot_mapping.push_back(-1);
    hb.cu_seqlens_q.push_back(b);
    hb.context_lens.push_back(c.L);
    hb.logits_indices.push_back(b);
  }
  hb.cu_seqlens_q.push_back(c.B);
  BatchTensors bt = be.upload_batch(hb);
  AttentionParams p{c.Hq, c.Hkv, c.D, float(1.0 / std::sqrt(double(c.D)))};

  const Impl saved = be.decode_impl();
  nlohmann::json row = {{"B", c.B}, {"L", c.L}, {"Hq", c.Hq}, {"Hkv", c.Hkv}, {"D", c.D},
                        {"block_size", c.block_size}};
  for (const auto& [impl, name] : kImpls) {
    be.set_decode_impl(impl);
    CUDA_CHECK(cudaMemsetAsync(out.raw(), 0xff, size_t(out.numel()) * 2, s));  // NaN
    be.attention(qkv, kc, vc, bt, p, out);
    bool finite = true;
    const double err =
        check_against_reference(be, c, qkv, kc, vc, out, hb.block_tables, stride, &finite);
    row[name] = {{"max_rel_err", err}, {"finite", finite}, {"correct", finite && err <= 2e-2}};
  }

  // Rounds alternate v1, v2 and the read pass, so the three see the same clocks.
  const int64_t kv_bytes = int64_t(c.B) * c.L * c.Hkv * c.D * 2 * 2;
  const int grid = read_pass_grid(be.num_sms());
  std::vector<double> att[2], rd;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < 2; ++i) {
      be.set_decode_impl(kImpls[i].first);
      att[i].push_back(median_ms(s, 1, 5, [&] { be.attention(qkv, kc, vc, bt, p, out); }));
    }
    rd.push_back(median_ms(s, 1, 5, [&] { launch_read_pass(read_buf.raw(), kv_bytes, sink, grid, s); }));
  }
  be.set_decode_impl(saved);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double rd_ms = median(rd);
  row["kv_bytes"] = kv_bytes;
  row["read_pass_gbs"] = kv_bytes / rd_ms / 1e6;
  double ms[2];
  for (int i = 0; i < 2; ++i) {
    ms[i] = median(att[i]);
    nlohmann::json& r = row[kImpls[i].second];
    r["attention_us"] = ms[i] * 1e3;
    r["attention_gbs"] = kv_bytes / ms[i] / 1e6;
    r["ratio_vs_read_pass"] = rd_ms / ms[i];
  }
  row["v2_speedup"] = ms[0] / ms[1];
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  int rounds = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json") json = true;
    else if (a == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else { std::fprintf(stderr, "usage: %s [--json] [--rounds N]\n", argv[0]); return 2; }
  }
  try {
    if (!cuda_available()) { std::fprintf(stderr, "no CUDA device\n"); return 77; }
    cuda::CudaBackend be(0);
    const DeviceFacts f = device_facts(0);
    int64_t max_bytes = 0;
    for (const Case& c : kCases) max_bytes = std::max(max_bytes, int64_t(c.B) * c.L * c.Hkv * c.D * 4);
    Tensor read_buf = be.empty({max_bytes / 4}, DType::I32);
    Tensor sink = be.empty({read_pass_grid(be.num_sms())}, DType::I32);
    cudaStream_t s = be.stream();
    launch_fill_bf16(read_buf.raw(), max_bytes / 2, 9, 1.f, s);
    auto* sk = static_cast<uint32_t*>(sink.raw());
    const int grid = read_pass_grid(be.num_sms());
    const double read_ms = median_ms(s, 2, 20, [&] { launch_read_pass(read_buf.raw(), max_bytes, sk, grid, s); });
    Tensor copy_dst = be.empty({max_bytes / 4}, DType::I32);
    const double copy_ms = median_ms(s, 2, 20, [&] {
      CUDA_CHECK(cudaMemcpyAsync(copy_dst.raw(), read_buf.raw(), size_t(max_bytes), cudaMemcpyDeviceToDevice, s));
    });
    copy_dst = Tensor();
    nlohmann::json j = {{"device", f.name}, {"sm", f.sm}, {"cc", std::to_string(f.cc_major) + "." + std::to_string(f.cc_minor)},
                        {"spec_hbm_gbs", f.spec_hbm_gbs}, {"read_pass_bytes", max_bytes},
                        {"read_pass_gbs", max_bytes / read_ms / 1e6},
                        {"d2d_copy_gbs", 2.0 * max_bytes / copy_ms / 1e6}, {"cases", nlohmann::json::array()}};
    bool ok = true;
    j["batch_sweep"] = nlohmann::json::array();
    for (const Case& c : kCases) {
      nlohmann::json r = run_case(be, c, read_buf, sk, rounds);
      for (const auto& [impl, name] : kImpls) {
        nlohmann::json& k = r[name];
        k["ratio_vs_spec"] = k["attention_gbs"].get<double>() / f.spec_hbm_gbs;
        ok = ok && k["correct"].get<bool>();
        if (!json)
          std::printf("%s B %3d L %5d Hq %2d Hkv %d D %3d bs %3d: %8.1f us %7.0f GB/s = %.2f of the "
                      "read pass (%.0f GB/s), %.2f of spec; rel err %.1e%s\n",
                      name, c.B, c.L, c.Hq, c.Hkv, c.D, c.block_size, k["attention_us"].get<double>(),
                      k["attention_gbs"].get<double>(), k["ratio_vs_read_pass"].get<double>(),
                      r["read_pass_gbs"].get<double>(), k["ratio_vs_spec"].get<double>(),
                      k["max_rel_err"].get<double>(), k["correct"].get<bool>() ? "" : "  WRONG");
      }
      if (c.L == 1024 && c.Hq == 16 && c.Hkv == 8 && c.D == 128 && c.block_size == 256)
        j["batch_sweep"].push_back({{"B", c.B},
                                    {"v1_gbs", r["v1"]["attention_gbs"]},
                                    {"v1_ratio_vs_read_pass", r["v1"]["ratio_vs_read_pass"]},
                                    {"v2_gbs", r["v2"]["attention_gbs"]},
                                    {"v2_ratio_vs_read_pass", r["v2"]["ratio_vs_read_pass"]},
                                    {"v2_speedup", r["v2_speedup"]}});
      j["cases"].push_back(r);
    }
    std::sort(j["batch_sweep"].begin(), j["batch_sweep"].end(),
              [](const nlohmann::json& x, const nlohmann::json& y) { return x["B"] < y["B"]; });
    j["headline"] = j["cases"][0];
    if (json) std::printf("%s\n", j.dump().c_str());
    else
      std::printf("%s: read pass %.0f GB/s, D2D copy %.0f GB/s (read+write), spec %.0f GB/s\n",
                  f.name.c_str(), j["read_pass_gbs"].get<double>(), j["d2d_copy_gbs"].get<double>(),
                  f.spec_hbm_gbs);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu_decode_attention: %s\n", e.what());
    return 1;
  }
}
