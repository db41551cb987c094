#include "testing/make_model_int4.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "loader/int4_packing.h"
#include "testing/random_normal.h"
#include "util/check.h"

namespace nanovllm {

namespace {

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

std::string prefix_of(const std::string& weight_name) {
  NV_CHECK(ends_with(weight_name, ".weight"), "make-model: '", weight_name, "' is not a weight");
  return weight_name.substr(0, weight_name.size() - 7);
}

// The input a projection reads, named so that projections of one input share it (q/k/v,
// gate/up): their act-order permutation is the same.
std::string input_key(const std::string& prefix) {
  for (const char* p : {"q_proj", "k_proj", "v_proj"})
    if (ends_with(prefix, p)) return prefix.substr(0, prefix.size() - 6) + "qkv";
  for (const char* p : {"gate_proj", "up_proj"})
    if (ends_with(prefix, p)) return prefix.substr(0, prefix.size() - std::char_traits<char>::length(p)) + "gate_up";
  return prefix;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

float round_f16(float v) { return f16_to_f32(f32_to_f16(v)); }

// Scale (f16-rounded) and integer zero of one group's values.
void group_params(const std::vector<float>& v, const Int4WriteOptions& o, float* scale, int* zero) {
  float lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  if (o.format == "awq") {
    *scale = std::max(round_f16(std::max(hi - lo, 1e-5f) / 15.f), f16_to_f32(1));
    *zero = std::clamp(-int(std::nearbyint(lo / *scale)), 0, 15);
    return;
  }
  lo = std::min(lo, 0.f), hi = std::max(hi, 0.f);
  if (o.sym) {
    hi = std::max(-lo, hi);
    if (lo < 0) lo = -hi;
  }
  if (lo == 0.f && hi == 0.f) lo = -1.f, hi = 1.f;
  *scale = std::max(round_f16((hi - lo) / 15.f), f16_to_f32(1));  // never 0 (1: the least f16)
  // v1 stores zero - 1 in 4 bits: a zero of 0 would read back as 16, so v1 keeps zeros >= 1.
  const int zmin = o.checkpoint_format == "gptq" ? 1 : 0;
  *zero = o.sym ? 8 : std::clamp(int(std::nearbyint(-lo / *scale)), zmin, 15);
}

}  // namespace

void check_int4_write_options(const Int4WriteOptions& o) {
  NV_CHECK(o.format == "gptq" || o.format == "awq", "make-model: --format must be gptq or awq, got '",
           o.format, "'");
  NV_CHECK(o.group_size == -1 || (o.group_size > 0 && o.group_size % 8 == 0),
           "make-model: --group-size must be -1 or a positive multiple of 8, got ", o.group_size);
  NV_CHECK(o.checkpoint_format == "gptq" || o.checkpoint_format == "gptq_v2",
           "make-model: --checkpoint-format must be gptq or gptq_v2, got '", o.checkpoint_format, "'");
  if (o.format == "awq")
    NV_CHECK(!o.desc_act && !o.sym && o.checkpoint_format == "gptq",
             "make-model: --desc-act, symmetric quantization and --checkpoint-format are GPTQ options "
             "(AWQ is always asymmetric, in group order)");
}

bool is_int4_linear(const std::string& name) {
  for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"})
    if (ends_with(name, std::string(".") + p + ".weight")) return true;
  return false;
}

std::vector<TensorSpec> int4_tensor_specs(const std::string& weight_name, const Shape& shape,
                                          const Int4WriteOptions& o) {
  const std::string p = prefix_of(weight_name);
  const int64_t N = shape[0], K = shape[1];
  const int64_t group = o.group_size > 0 ? o.group_size : K;
  NV_CHECK(K % group == 0 && K % 8 == 0 && N % 8 == 0, "make-model: --group-size ", o.group_size,
           " does not divide the ", K, " input features of '", weight_name, "' (or a size is not a multiple of 8)");
  const int64_t G = K / group;
  std::vector<TensorSpec> v;
  if (o.format == "gptq") {
    v.push_back({p + ".qweight", DType::I32, {K / 8, N}});
    v.push_back({p + ".g_idx", DType::I32, {K}});
  } else {
    v.push_back({p + ".qweight", DType::I32, {K, N / 8}});
  }
  v.push_back({p + ".qzeros", DType::I32, {G, N / 8}});
  v.push_back({p + ".scales", DType::F16, {G, N}});
  return v;
}

std::vector<std::pair<std::string, Tensor>> quantize_int4_tensors(const std::string& weight_name,
                                                                  const float* w, int64_t N, int64_t K,
                                                                  const Int4WriteOptions& o, uint64_t seed) {
  const std::string p = prefix_of(weight_name);
  const int64_t group = o.group_size > 0 ? o.group_size : K, G = K / group;
  const bool awq = o.format == "awq";
  // Visit order of the input features (GPTQ act-order: a permutation per input), g_idx from it.
  std::vector<int32_t> order(static_cast<size_t>(K));
  std::iota(order.begin(), order.end(), 0);
  if (o.desc_act) {
    uint64_t st = seed ^ fnv1a(input_key(p));
    for (int64_t i = K - 1; i > 0; --i) std::swap(order[size_t(i)], order[size_t(splitmix64(st) % uint64_t(i + 1))]);
  }
  Tensor g_idx = Tensor::empty({K}, DType::I32);
  for (int64_t i = 0; i < K; ++i) g_idx.data<int32_t>()[order[size_t(i)]] = int32_t(i / group);
  std::vector<uint8_t> q(size_t(N * K)), z(size_t(N * G));
  std::vector<float> s(size_t(G * N));  // [G, N], as stored
  std::vector<float> v(static_cast<size_t>(group));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      for (int64_t i = 0; i < group; ++i) v[size_t(i)] = w[n * K + order[size_t(g * group + i)]];
      float scale;
      int zero;
      group_params(v, o, &scale, &zero);
      s[size_t(g * N + n)] = scale;
      z[size_t(n * G + g)] = uint8_t(zero);
      for (int64_t i = 0; i < group; ++i) {
        const int64_t k = order[size_t(g * group + i)];
        q[size_t(n * K + k)] = uint8_t(std::clamp(int(std::nearbyint(w[n * K + k] / scale)) + zero, 0, 15));
      }
    }
  std::vector<std::pair<std::string, Tensor>> out;
  Tensor qweight = awq ? Tensor::empty({K, N / 8}, DType::I32) : Tensor::empty({K / 8, N}, DType::I32);
  if (awq) awq_pack_qweight(q.data(), N, K, qweight.data<int32_t>());
  else gptq_pack_qweight(q.data(), N, K, qweight.data<int32_t>());
  out.push_back({p + ".qweight", qweight});
  Tensor qzeros = Tensor::empty({G, N / 8}, DType::I32);
  pack_qzeros(z.data(), N, G, awq, !awq && o.checkpoint_format == "gptq" ? 1 : 0, qzeros.data<int32_t>());
  out.push_back({p + ".qzeros", qzeros});
  Tensor scales = Tensor::empty({G, N}, DType::F16);
  convert_f32_to(s.data(), scales.raw(), DType::F16, G * N);
  out.push_back({p + ".scales", scales});
  if (!awq) out.push_back({p + ".g_idx", g_idx});
  return out;
}

nlohmann::ordered_json int4_quantization_config(const Int4WriteOptions& o) {
  nlohmann::ordered_json q;
  q["quant_method"] = o.format;
  q["bits"] = 4;
  q["group_size"] = o.group_size;
  if (o.format == "gptq") {
    q["desc_act"] = o.desc_act;
    q["sym"] = o.sym;
    q["static_groups"] = false;
    q["true_sequential"] = true;
    q["damp_percent"] = 0.01;
    q["lm_head"] = false;
    q["checkpoint_format"] = o.checkpoint_format;
  } else {
    q["zero_point"] = true;
    q["version"] = "gemm";
    q["modules_to_not_convert"] = nullptr;
  }
  return q;
}

}  // namespace nanovllm
