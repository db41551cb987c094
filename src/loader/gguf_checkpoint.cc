// GGUF files -> HF-named tensors: file discovery (split sets), the name map and the tensor
// transforms. The config.json synthesis is in gguf_config.cc.
#include "loader/gguf_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <regex>

#include "loader/gguf_quants.h"
#include "util/check.h"

namespace nanovllm {

namespace fs = std::filesystem;

namespace {

// llama.cpp's split naming: <prefix>-00001-of-00003.gguf
const std::regex& split_re() {
  static const std::regex re(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  return re;
}

bool ends_with(const std::string& s, const char* suf) {
  const size_t n = std::strlen(suf);
  return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

// All shards of the split set `file` belongs to (or just `file`), checked to exist.
std::vector<std::string> split_set(const fs::path& file) {
  std::smatch m;
  const std::string name = file.filename().string();
  if (!std::regex_match(name, m, split_re())) return {file.string()};
  const int count = std::stoi(m[3].str());
  if (count < 1) NV_THROW("GGUF split file '", file.string(), "' names a split count of 0");
  std::vector<std::string> out;
  for (int i = 1; i <= count; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "-%05d-of-%05d.gguf", i, count);
    fs::path p = file.parent_path() / (m[1].str() + buf);
    std::error_code ec;
    if (!fs::is_regular_file(p, ec))
      NV_THROW("GGUF split set of '", file.string(), "' is incomplete: '", p.string(), "' is missing");
    out.push_back(p.string());
  }
  return out;
}

}  // namespace

std::vector<std::string> gguf_model_files(const std::string& path) {
  std::error_code ec;
  fs::path p(path);
  if (fs::is_regular_file(p, ec)) return ends_with(path, ".gguf") ? split_set(p) : std::vector<std::string>{};
  if (!fs::is_directory(p, ec)) return {};
  // A directory: its *.gguf files, minus multimodal projectors (mmproj*.gguf), grouped into
  // models (a split set is one model).
  std::map<std::string, fs::path> models;  // first file of each model -> path
  for (const auto& e : fs::directory_iterator(p, ec)) {
    const std::string name = e.path().filename().string();
    if (!ends_with(name, ".gguf") || name.rfind("mmproj", 0) == 0) continue;
    std::smatch m;
    std::string key = std::regex_match(name, m, split_re()) ? m[1].str() : name;
    if (!models.count(key) || e.path() < models[key]) models[key] = e.path();
  }
  if (models.empty()) return {};
  if (models.size() > 1) {
    std::string names;
    for (const auto& [k, v] : models) names += (names.empty() ? "" : ", ") + v.filename().string();
    NV_THROW("model directory '", path, "' holds several GGUF models (", names,
             "); pass the file to use as --model");
  }
  return split_set(models.begin()->second);
}

std::shared_ptr<GgufCheckpoint> GgufCheckpoint::open(const std::string& path) {
  std::vector<std::string> files = gguf_model_files(path);
  if (files.empty()) NV_THROW("no GGUF file at '", path, "'");
  auto c = std::make_shared<GgufCheckpoint>();
  c->path_ = files[0];
  for (const auto& f : files) c->files_.push_back(GgufFile::open(f));
  if (files.size() > 1) {
    for (size_t i = 0; i < files.size(); ++i) {
      const GgufFile& f = *c->files_[i];
      if (f.get_int("split.no", int64_t(i)) != int64_t(i) ||
          f.get_int("split.count", int64_t(files.size())) != int64_t(files.size()))
        NV_THROW("GGUF split file '", files[i], "' says it is split ", f.get_int("split.no", -1),
                 " of ", f.get_int("split.count", -1), ", its name says ", i, " of ", files.size());
    }
  }
  c->arch_ = c->meta().get_string("general.architecture");
  c->map_tensors();
  return c;
}

void GgufCheckpoint::map_tensors() {
  const GgufFile& m = meta();
  const std::string& a = arch_;
  const bool llama_rope = a == "llama";  // llama.cpp's converter permutes q/k rows for these
  const int n_head = int(m.get_int(a + ".attention.head_count", 0));
  const int n_head_kv = int(m.get_int(a + ".attention.head_count_kv", n_head));
  static const std::map<std::string, std::string> per_layer = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},   {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},   {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},       {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},       {"attn_output.bias", "self_attn.o_proj.bias"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},    {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},    {"ffn_gate_inp.weight", "mlp.gate.weight"},
  };
  const bool gemma = a == "gemma3";
  static const std::regex blk_re(R"(blk\.(\d+)\.(.+))");
  for (const auto& f : files_) {
    for (const GgufTensor& t : f->tensors()) {
      Ref r;
      r.file = f;
      r.t = &t;
      std::vector<std::pair<std::string, Ref>> out;
      std::smatch mm;
      if (t.name == "token_embd.weight") {
        out.push_back({"model.embed_tokens.weight", r});
      } else if (t.name == "output_norm.weight") {
        out.push_back({"model.norm.weight", r});
      } else if (t.name == "output.weight") {
        out.push_back({"lm_head.weight", r});
      } else if (std::regex_match(t.name, mm, blk_re)) {
        const std::string L = "model.layers." + mm[1].str() + ".", rest = mm[2].str();
        std::string hf;
        if (gemma && rest == "ffn_norm.weight") hf = "pre_feedforward_layernorm.weight";
        else if (gemma && rest == "post_attention_norm.weight") hf = "post_attention_layernorm.weight";
        else if (gemma && rest == "post_ffw_norm.weight") hf = "post_feedforward_layernorm.weight";
        else if (auto it = per_layer.find(rest); it != per_layer.end()) hf = it->second;
        if (!hf.empty()) {
          if (llama_rope && (rest == "attn_q.weight" || rest == "attn_k.weight")) {
            r.tf = Ref::Tf::UnpermuteRoPE;
            r.heads = rest == "attn_q.weight" ? n_head : n_head_kv;
            if (r.heads <= 0 || t.ne.size() != 2 || t.ne[1] % (2 * r.heads) != 0)
              NV_THROW("GGUF file '", f->path(), "': tensor '", t.name, "' cannot be split into ",
                       r.heads, " heads");
          }
          out.push_back({L + hf, r});
        } else if (rest == "ffn_gate_exps.weight" || rest == "ffn_up_exps.weight" ||
                   rest == "ffn_down_exps.weight") {
          if (t.ne.size() != 3)
            NV_THROW("GGUF file '", f->path(), "': expert tensor '", t.name, "' is not 3-D");
          const std::string proj = rest.substr(4, rest.find('_', 4) - 4);  // gate | up | down
          for (int64_t e = 0; e < t.ne[2]; ++e) {
            Ref re = r;
            re.expert = int(e);
            out.push_back({L + "mlp.experts." + std::to_string(e) + "." + proj + "_proj.weight", re});
          }
        }
      }
      // Gemma stores (1 + w) for every RMSNorm weight (llama.cpp's converter adds the 1).
      for (auto& [hf, ref] : out)
        if (gemma && t.ne.size() == 1 && ends_with(hf, "norm.weight")) ref.tf = Ref::Tf::MinusOne;
      if (out.empty()) out.push_back({t.name, r});  // unmapped: kept, so the model reports it unused
      for (auto& [hf, ref] : out)
        if (!refs_.emplace(hf, ref).second)
          NV_THROW("GGUF model '", path_, "': tensor '", t.name, "' appears twice (as '", hf, "')");
    }
  }
}

namespace {
// The GGUF row (of `rows`, within an expert slice) holding HF row hr: HF row (head h, half j,
// i) of a RoPE-permuted q / k was written by llama.cpp's converter at (h, i, j).
int64_t file_row(const GgufCheckpoint::Ref& r, int64_t rows, int64_t hr) {
  if (r.tf != GgufCheckpoint::Ref::Tf::UnpermuteRoPE) return hr;
  const int64_t d = rows / r.heads;
  const int64_t h = hr / d, rem = hr % d, j = rem / (d / 2), i = rem % (d / 2);
  return h * d + 2 * i + j;
}
}  // namespace

namespace {
// An HF [out, in] weight of GGUF tensor t (one expert's slice of a stack alike) in groups of gs
// consecutive columns: g's shape, codes and scales allocated, g_idx = k / gs.
void shape_groups(Int4Groups& g, const GgufTensor& t, int64_t gs) {
  g.N = t.ne[1];
  g.K = t.ne[0];
  g.G = g.K / gs;
  g.q = Tensor::empty({g.N, g.K}, DType::U8);
  g.scales = Tensor::empty({g.N, g.G}, DType::F32);
  g.g_idx = Tensor::empty({g.K}, DType::I32);
  for (int64_t k = 0; k < g.K; ++k) g.g_idx.data<int32_t>()[k] = int32_t(k / gs);
}
}  // namespace

bool GgufCheckpoint::has_int4(const std::string& hf_name) const {
  auto it = refs_.find(hf_name);
  if (it == refs_.end()) return false;
  const Ref& r = it->second;
  const uint32_t ty = r.t->type;
  return (ty == uint32_t(GgmlType::Q4_K) || ty == uint32_t(GgmlType::Q5_K) || ty == uint32_t(GgmlType::Q6_K) ||
          ty == uint32_t(GgmlType::Q3_K) || ty == uint32_t(GgmlType::Q2_K) || ty == uint32_t(GgmlType::Q5_1) ||
          ty == uint32_t(GgmlType::IQ4_NL) ||
          ty == uint32_t(GgmlType::IQ4_XS)) &&
         r.t->ne.size() == (r.expert >= 0 ? 3u : 2u) && r.tf != Ref::Tf::MinusOne;
}

int GgufCheckpoint::int4_bits(const std::string& hf_name) const {
  if (!has_int4(hf_name)) return 0;
  const uint32_t ty = refs_.at(hf_name).t->type;
  return ty == uint32_t(GgmlType::Q6_K)                                    ? 6
         : ty == uint32_t(GgmlType::Q3_K)                                  ? 3
         : ty == uint32_t(GgmlType::Q5_K) || ty == uint32_t(GgmlType::Q5_1) ? 5
         : ty == uint32_t(GgmlType::Q2_K)                                  ? 2
                                                                           : 4;
}

bool GgufCheckpoint::int4_table(const std::string& hf_name) const {
  if (!has_int4(hf_name)) return false;
  const uint32_t ty = refs_.at(hf_name).t->type;
  return ty == uint32_t(GgmlType::IQ4_NL) || ty == uint32_t(GgmlType::IQ4_XS);
}

Int4Groups GgufCheckpoint::get_int4(const std::string& hf_name) const {
  NV_CHECK(has_int4(hf_name), "tensor '", hf_name, "' of ", path_,
           " is not a Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL or IQ4_XS linear weight");
  const Ref& r = refs_.at(hf_name);
  const GgufTensor& t = *r.t;
  Int4Groups g;
  if (int4_table(hf_name)) {  // codes into kIq4nlTable, an f32 scale per 32 (int4_groups.h)
    const bool xs = t.type == uint32_t(GgmlType::IQ4_XS);
    g.iq4_table = true;
    shape_groups(g, t, 32);
    const size_t row_bytes = xs ? size_t(g.K / 256) * 136 : size_t(g.K / 32) * 18;
    const int64_t row0 = r.expert >= 0 ? int64_t(r.expert) * g.N : 0;
    for (int64_t hr = 0; hr < g.N; ++hr)
      (xs ? unpack_row_iq4_xs : unpack_row_iq4_nl)(t.data + size_t(row0 + file_row(r, g.N, hr)) * row_bytes, g.K,
                                                   g.q.data<uint8_t>() + hr * g.K, g.scales.data<float>() + hr * g.G);
    return g;
  }
  const bool q3 = t.type == uint32_t(GgmlType::Q3_K);
  if (t.type == uint32_t(GgmlType::Q6_K) || q3) {  // codes, d x sc per 16, d per 256 (int4_groups.h)
    g.bits = q3 ? 3 : 6;
    shape_groups(g, t, 16);
    g.zeros = Tensor::empty({g.N, g.G}, DType::U8);
    std::memset(g.zeros.raw(), q3 ? 4 : 32, g.zeros.nbytes());
    const int64_t S = g.K / 256;
    g.d = Tensor::empty({g.N, S}, DType::F32);
    g.sub_scale = Tensor::empty({g.N, g.G}, DType::U8);
    const size_t row_bytes = size_t(S) * (q3 ? 110 : 210);
    const int64_t row0 = r.expert >= 0 ? int64_t(r.expert) * g.N : 0;
    for (int64_t hr = 0; hr < g.N; ++hr)
      (q3 ? unpack_row_q3_k : unpack_row_q6_k)(
          t.data + size_t(row0 + file_row(r, g.N, hr)) * row_bytes, g.K, g.q.data<uint8_t>() + hr * g.K,
          g.scales.data<float>() + hr * g.G, g.d.data<float>() + hr * S, g.sub_scale.data<uint8_t>() + hr * g.G);
    return g;
  }
  if (t.type == uint32_t(GgmlType::Q5_1)) {  // 5-bit codes, the f16 d and m per 32 (no superblocks)
    g.bits = 5;
    shape_groups(g, t, 32);
    g.mins = Tensor::empty({g.N, g.G}, DType::F32);
    const size_t row_bytes = size_t(g.G) * 24;
    const int64_t row0 = r.expert >= 0 ? int64_t(r.expert) * g.N : 0;
    for (int64_t hr = 0; hr < g.N; ++hr)
      unpack_row_q5_1(t.data + size_t(row0 + file_row(r, g.N, hr)) * row_bytes, g.K, g.q.data<uint8_t>() + hr * g.K,
                      g.scales.data<float>() + hr * g.G, g.mins.data<float>() + hr * g.G);
    return g;
  }
  // Q4_K / Q5_K (groups of 32) and Q2_K (groups of 16): codes, scale and min per group, their
  // factors per superblock of 256 (int4_groups.h).
  const bool q2 = t.type == uint32_t(GgmlType::Q2_K);
  const int gs = q2 ? 16 : 32;
  shape_groups(g, t, gs);
  g.mins = Tensor::empty({g.N, g.G}, DType::F32);
  const int64_t S = g.K / 256;
  g.d = Tensor::empty({g.N, S}, DType::F32);
  g.dmin = Tensor::empty({g.N, S}, DType::F32);
  g.sub_scale = Tensor::empty({g.N, g.G}, DType::U8);
  g.sub_min = Tensor::empty({g.N, g.G}, DType::U8);
  const bool q5 = t.type == uint32_t(GgmlType::Q5_K);  // Q4_K's parameters with a fifth code bit
  g.bits = q5 ? 5 : q2 ? 2 : 4;
  const size_t row_bytes = size_t(S) * (q5 ? 176 : q2 ? 84 : 144);
  const int64_t row0 = r.expert >= 0 ? int64_t(r.expert) * g.N : 0;  // an expert's slice of the stack
  for (int64_t hr = 0; hr < g.N; ++hr)
    (q5 ? unpack_row_q5_k : q2 ? unpack_row_q2_k : unpack_row_q4_k)(
        t.data + size_t(row0 + file_row(r, g.N, hr)) * row_bytes, g.K, g.q.data<uint8_t>() + hr * g.K,
        g.scales.data<float>() + hr * g.G, g.mins.data<float>() + hr * g.G, g.d.data<float>() + hr * S,
        g.dmin.data<float>() + hr * S, g.sub_scale.data<uint8_t>() + hr * g.G, g.sub_min.data<uint8_t>() + hr * g.G);
  return g;
}

Tensor GgufCheckpoint::get(const std::string& hf_name) const {
  auto it = refs_.find(hf_name);
  if (it == refs_.end()) NV_THROW("missing tensor '", hf_name, "' in ", path_);
  const Ref& r = it->second;
  const GgufTensor& t = *r.t;
  const GgmlTypeInfo info = ggml_type_info(t.type);
  if (!info.dequantizable)
    NV_THROW("GGUF file '", r.file->path(), "': tensor '", t.name, "' has type ", info.name,
             ", which nanovllm cannot load yet (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, "
             "Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)");
  // Rows of ne[0] elements; the HF shape reverses ne. An expert slice takes its rows only.
  const int64_t cols = t.ne[0];
  int64_t rows = t.rows(), row0 = 0;
  Shape shape;
  if (r.expert >= 0) {
    rows = t.ne[1];
    row0 = int64_t(r.expert) * rows;
    shape = {rows, cols};
  } else {
    for (size_t d = t.ne.size(); d-- > 0;) shape.push_back(t.ne[d]);
  }
  const size_t row_bytes = size_t(cols / info.block_size) * size_t(info.type_size);
  const DType out_dt = t.type == uint32_t(GgmlType::F16)    ? DType::F16
                       : t.type == uint32_t(GgmlType::BF16) ? DType::BF16
                                                             : DType::F32;
  Tensor out = Tensor::empty(shape, out_dt);
  uint8_t* dst = static_cast<uint8_t*>(out.raw());
  const size_t out_row = size_t(cols) * dtype_size(out_dt);
  for (int64_t hr = 0; hr < rows; ++hr) {
    const uint8_t* src = t.data + size_t(row0 + file_row(r, rows, hr)) * row_bytes;
    if (out_dt == DType::F32)
      dequantize_row(GgmlType(t.type), src, reinterpret_cast<float*>(dst + size_t(hr) * out_row), cols);
    else
      std::memcpy(dst + size_t(hr) * out_row, src, out_row);
  }
  if (r.tf == Ref::Tf::MinusOne) {
    NV_CHECK(out_dt == DType::F32, "GGUF file '", r.file->path(), "': norm '", t.name,
             "' must be F32");
    float* v = out.data<float>();
    for (int64_t i = 0; i < out.numel(); ++i) v[i] -= 1.f;
  }
  return out;
}

std::string GgufCheckpoint::type_summary() const {
  std::map<std::string, int> n;
  for (const auto& f : files_)
    for (const auto& t : f->tensors()) n[ggml_type_name(t.type)]++;
  std::string s;
  for (const auto& [k, v] : n) s += (s.empty() ? "" : ", ") + k + ": " + std::to_string(v);
  return s;
}

}  // namespace nanovllm
