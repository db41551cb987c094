// Int4Checkpoint (loader/int4_checkpoint.h): finds the GPTQ / AWQ modules of a checkpoint,
// validates their fields from the safetensors headers (no data read), and unpacks them on demand.
#include "loader/int4_checkpoint.h"

#include <cstring>

#include "loader/int4_packing.h"
#include "util/check.h"

namespace nanovllm {

namespace {

const char* kFields[] = {"qweight", "qzeros", "scales", "g_idx"};

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() > suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

const char* method_name(const Int4QuantConfig& c) { return c.method == "awq" ? "AWQ" : "GPTQ"; }

}  // namespace

Int4Checkpoint::Int4Checkpoint(const Int4QuantConfig& config, const Files& files) : cfg_(config) {
  for (const auto& [name, file] : files) {
    for (const char* f : kFields) {
      const std::string suf = std::string(".") + f;
      if (!ends_with(name, suf)) continue;
      const std::string prefix = name.substr(0, name.size() - suf.size());
      const std::string wname = prefix + ".weight";
      // A field without its qweight cannot be a module: name the missing field.
      NV_CHECK(files.count(prefix + ".qweight"), file->path(), ": tensor '", name, "' has no '", prefix,
               ".qweight' beside it (the qweight field of ", method_name(cfg_), " module '", prefix, "')");
      NV_CHECK(!files.count(wname), file->path(), ": module '", prefix, "' has both '", wname,
               "' and quantized fields ('", name, "')");
      fields_[name] = wname;
      if (std::strcmp(f, "qweight") == 0) modules_[wname].prefix = prefix;
    }
  }
  for (auto& [wname, m] : modules_) check_module(m, files);
}

void Int4Checkpoint::check_module(Module& m, const Files& files) {
  const bool awq = cfg_.format == Int4Format::AwqGemm;
  const char* meth = method_name(cfg_);
  auto field = [&](const char* f, bool required) -> std::shared_ptr<SafetensorsFile> {
    const std::string t = m.prefix + "." + f;
    auto it = files.find(t);
    if (it != files.end()) return it->second;
    NV_CHECK(!required, files.at(m.prefix + ".qweight")->path(), ": ", meth, " module '", m.prefix,
             "' has no tensor '", t, "' (its ", f, " field; quantization_config: ", cfg_.str(), ")");
    return nullptr;
  };
  m.qweight = field("qweight", true);
  m.qzeros = field("qzeros", true);
  m.scales = field("scales", true);
  m.g_idx = field("g_idx", !awq && cfg_.desc_act);
  if (awq && m.g_idx)
    NV_THROW(m.g_idx->path(), ": tensor '", m.prefix, ".g_idx' (field g_idx) in an AWQ checkpoint (AWQ "
             "groups are consecutive input features: it has no g_idx)");
  auto info = [&](const std::shared_ptr<SafetensorsFile>& f, const char* fld) -> const TensorInfo& {
    return f->tensors().at(m.prefix + "." + fld);
  };
  auto expect = [&](const std::shared_ptr<SafetensorsFile>& f, const char* fld, std::initializer_list<DType> dts,
                    const Shape& shape) {
    const TensorInfo& ti = info(f, fld);
    bool ok = false;
    for (DType d : dts) ok = ok || ti.dtype == d;
    NV_CHECK(ok, f->path(), ": tensor '", m.prefix, ".", fld, "' (field ", fld, ") is ", dtype_name(ti.dtype),
             ", expected ", dtype_name(*dts.begin()));
    NV_CHECK(ti.shape == shape, f->path(), ": tensor '", m.prefix, ".", fld, "' (field ", fld, ") has shape ",
             shape_str(ti.shape), ", expected ", shape_str(shape), " for a [", m.N, ", ", m.K, "] ", meth,
             " weight in ", m.G, " group(s) of ", m.group, " (quantization_config.group_size ", cfg_.group_size, ")");
  };
  const TensorInfo& qw = info(m.qweight, "qweight");
  NV_CHECK(qw.dtype == DType::I32 && qw.shape.size() == 2 && qw.shape[0] > 0 && qw.shape[1] > 0,
           m.qweight->path(), ": tensor '", m.prefix, ".qweight' (field qweight) is ", dtype_name(qw.dtype),
           shape_str(qw.shape), ", expected a non-empty 2-D I32 tensor (",
           awq ? "[in_features, out_features / 8]" : "[in_features / 8, out_features]", ")");
  m.K = awq ? qw.shape[0] : 8 * qw.shape[0];
  m.N = awq ? 8 * qw.shape[1] : qw.shape[1];
  NV_CHECK(m.N % 8 == 0, m.qweight->path(), ": tensor '", m.prefix, ".qweight' (field qweight) has ", m.N,
           " output features, not a multiple of 8 (qzeros packs 8 per int32)");
  m.group = cfg_.group_size > 0 ? cfg_.group_size : m.K;
  NV_CHECK(m.K % m.group == 0, cfg_.source, ": quantization_config.group_size ", cfg_.group_size,
           " does not divide the ", m.K, " input features of tensor '", m.prefix, ".qweight' in ",
           m.qweight->path());
  m.G = m.K / m.group;
  expect(m.qzeros, "qzeros", {DType::I32}, {m.G, m.N / 8});
  expect(m.scales, "scales", {DType::F16, DType::BF16, DType::F32}, {m.G, m.N});
  if (m.g_idx) expect(m.g_idx, "g_idx", {DType::I32, DType::I64}, {m.K});
}

Shape Int4Checkpoint::shape(const std::string& weight_name) const {
  const Module& m = modules_.at(weight_name);
  return {m.N, m.K};
}

std::vector<std::string> Int4Checkpoint::weight_names() const {
  std::vector<std::string> v;
  for (const auto& [n, m] : modules_) v.push_back(n);
  return v;
}

Int4Groups Int4Checkpoint::unpack(const std::string& weight_name) const {
  auto it = modules_.find(weight_name);
  NV_CHECK(it != modules_.end(), "'", weight_name, "' is not a quantized module of this checkpoint");
  const Module& m = it->second;
  const bool awq = cfg_.format == Int4Format::AwqGemm;
  Int4Groups w;
  w.N = m.N, w.K = m.K, w.G = m.G;
  w.q = Tensor::empty({m.N, m.K}, DType::U8);
  w.zeros = Tensor::empty({m.N, m.G}, DType::U8);
  w.scales = Tensor::empty({m.N, m.G}, DType::F32);
  w.g_idx = Tensor::empty({m.K}, DType::I32);
  const Tensor qw = m.qweight->get(m.prefix + ".qweight"), qz = m.qzeros->get(m.prefix + ".qzeros");
  if (awq) awq_unpack_qweight(qw.data<int32_t>(), m.K, m.N, w.q.data<uint8_t>());
  else gptq_unpack_qweight(qw.data<int32_t>(), m.K, m.N, w.q.data<uint8_t>());
  unpack_qzeros(qz.data<int32_t>(), m.G, m.N, awq, cfg_.format == Int4Format::GptqV1 ? 1 : 0,
                w.zeros.data<uint8_t>());
  // scales [G, N] -> [N, G] f32 (exact for f16 / bf16).
  const Tensor sc = m.scales->get(m.prefix + ".scales");
  std::vector<float> s(size_t(m.G * m.N));
  convert_to_f32(sc.raw(), sc.dtype(), s.data(), m.G * m.N);
  for (int64_t g = 0; g < m.G; ++g)
    for (int64_t n = 0; n < m.N; ++n) w.scales.data<float>()[n * m.G + g] = s[size_t(g * m.N + n)];
  int32_t* gi = w.g_idx.data<int32_t>();
  if (!m.g_idx) {
    for (int64_t k = 0; k < m.K; ++k) gi[k] = int32_t(k / m.group);
    return w;
  }
  const Tensor g = m.g_idx->get(m.prefix + ".g_idx");
  for (int64_t k = 0; k < m.K; ++k) {
    const int64_t v = g.dtype() == DType::I64 ? g.data<int64_t>()[k] : g.data<int32_t>()[k];
    NV_CHECK(v >= 0 && v < m.G, m.g_idx->path(), ": tensor '", m.prefix, ".g_idx' (field g_idx) holds group ", v,
             " at input feature ", k, ", outside [0, ", m.G, ")");
    gi[k] = int32_t(v);
  }
  return w;
}

Tensor Int4Checkpoint::dequantize(const std::string& weight_name) const {
  return dequantize_int4(unpack(weight_name));
}

std::pair<std::string, Tensor> Int4Checkpoint::scales(const std::string& weight_name) const {
  const Module& m = modules_.at(weight_name);
  return {m.prefix + ".scales", m.scales->get(m.prefix + ".scales")};
}

Tensor dequantize_int4(const Int4Groups& w) {
  Tensor out = Tensor::empty({w.N, w.K}, DType::F32);
  const uint8_t* q = w.q.data<uint8_t>();
  const float* s = w.scales.data<float>();
  const int32_t* gi = w.g_idx.data<int32_t>();
  float* o = out.data<float>();
  if (w.has_mins()) {  // scale * q + min: one rounding, as ggml's Q4_K (scale * q is exact)
    const float* mn = w.mins.data<float>();
    for (int64_t n = 0; n < w.N; ++n)
      for (int64_t k = 0; k < w.K; ++k)
        o[n * w.K + k] = s[n * w.G + gi[k]] * float(q[n * w.K + k]) + mn[n * w.G + gi[k]];
    return out;
  }
  if (w.iq4_table) {  // scale x table value, as ggml's dequantize_row_iq4_*
    for (int64_t n = 0; n < w.N; ++n)
      for (int64_t k = 0; k < w.K; ++k)
        o[n * w.K + k] = s[n * w.G + gi[k]] * float(kIq4nlTable[q[n * w.K + k] & 15]);
    return out;
  }
  const uint8_t* z = w.zeros.data<uint8_t>();
  for (int64_t n = 0; n < w.N; ++n)
    for (int64_t k = 0; k < w.K; ++k) {
      const int64_t g = gi[k];
      o[n * w.K + k] = s[n * w.G + g] * float(int(q[n * w.K + k]) - int(z[n * w.G + g]));
    }
  return out;
}

}  // namespace nanovllm
