// quantization_config parsing (loader/quant_config.h). Field names and defaults as AutoGPTQ /
// GPTQModel and AutoAWQ write them (transformers' GPTQConfig / AwqConfig): GPTQ bits,
// group_size, desc_act, sym, checkpoint_format (older GPTQModel: format); AWQ bits (older
// quant_config.json: w_bit), group_size (q_group_size), zero_point, version.
#include "loader/quant_config.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm {

namespace {

using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// Reads field `key` (or its older spelling `alt`) of quantization_config q into out.
struct Fields {
  const json& q;
  const std::string& src;
  const json* find(const char* key, const char* alt = nullptr) const {
    if (q.contains(key) && !q[key].is_null()) return &q[key];
    if (alt && q.contains(alt) && !q[alt].is_null()) return &q[alt];
    return nullptr;
  }
  void integer(const char* key, const char* alt, int* out) const {
    if (const json* v = find(key, alt)) {
      NV_CHECK(v->is_number_integer(), src, ": quantization_config.", key, " must be an integer, got ", v->dump());
      *out = v->get<int>();
    }
  }
  void boolean(const char* key, bool* out) const {
    if (const json* v = find(key)) {
      NV_CHECK(v->is_boolean(), src, ": quantization_config.", key, " must be true or false, got ", v->dump());
      *out = v->get<bool>();
    }
  }
  std::string string(const char* key, const char* alt, const std::string& dflt) const {
    const json* v = find(key, alt);
    if (!v) return dflt;
    NV_CHECK(v->is_string(), src, ": quantization_config.", key, " must be a string, got ", v->dump());
    return v->get<std::string>();
  }
};

void parse_gptq(const Fields& f, Int4QuantConfig& c) {
  f.boolean("sym", &c.sym);
  f.boolean("desc_act", &c.desc_act);
  const std::string fmt = lower(f.string("checkpoint_format", "format", "gptq"));
  if (fmt == "gptq") c.format = Int4Format::GptqV1;
  else if (fmt == "gptq_v2") c.format = Int4Format::GptqV2;
  else
    NV_THROW(f.src, ": quantization_config.checkpoint_format '", fmt,
             "' is not supported (gptq or gptq_v2; Marlin / BitBLAS / other repacked layouts are not)");
  bool marlin = false;
  f.boolean("is_marlin_format", &marlin);
  NV_CHECK(!marlin, f.src, ": quantization_config.is_marlin_format true is not supported (plain GPTQ packing only)");
  const std::string pack = lower(f.string("pack_dtype", nullptr, "int32"));
  NV_CHECK(pack == "int32" || pack == "torch.int32", f.src, ": quantization_config.pack_dtype '", pack,
           "' is not supported (int32 only)");
  // GPTQModel's per-module overrides: "-:regex" leaves modules unquantized (their tensors say
  // so); "+:regex" / "regex" change bits or group size per module, which this loader does not do.
  if (const json* d = f.find("dynamic")) {
    NV_CHECK(d->is_object(), f.src, ": quantization_config.dynamic must be an object, got ", d->dump());
    for (auto it = d->begin(); it != d->end(); ++it) {
      NV_CHECK(it.key().rfind("-:", 0) == 0, f.src, ": quantization_config.dynamic rule '", it.key(),
               "' overrides per-module settings, which is not supported (only \"-:\" exclusions are)");
      c.modules_to_not_convert.push_back(it.key().substr(2));
    }
  }
}

void parse_awq(const Fields& f, Int4QuantConfig& c) {
  c.sym = false;
  c.desc_act = false;
  bool zero_point = true;
  f.boolean("zero_point", &zero_point);
  NV_CHECK(zero_point, f.src, ": quantization_config.zero_point false is not supported (AWQ GEMM "
                              "checkpoints always carry zero points)");
  const std::string version = lower(f.string("version", nullptr, "gemm"));
  NV_CHECK(version == "gemm", f.src, ": quantization_config.version '", version,
           "' is not supported (AWQ gemm packing only; gemv / gemv_fast / marlin / exllama are "
           "other layouts)");
  c.format = Int4Format::AwqGemm;
  if (const json* m = f.find("modules_to_not_convert")) {
    NV_CHECK(m->is_array(), f.src, ": quantization_config.modules_to_not_convert must be a list, got ", m->dump());
    for (const json& s : *m) {
      NV_CHECK(s.is_string(), f.src, ": quantization_config.modules_to_not_convert holds ", s.dump(), ", not a name");
      c.modules_to_not_convert.push_back(s.get<std::string>());
    }
  }
}

}  // namespace

std::string Int4QuantConfig::str() const {
  std::string s = method + " (";
  s += format == Int4Format::GptqV1 ? "v1 zeros, " : format == Int4Format::GptqV2 ? "v2 zeros, " : "gemm, ";
  s += group_size < 0 ? "one group per row" : "group " + std::to_string(group_size);
  if (format != Int4Format::AwqGemm) s += sym ? ", sym" : ", asym";
  if (desc_act) s += ", desc_act";
  return s + ")";
}

std::optional<Int4QuantConfig> parse_quant_config(const json& config, const std::string& source) {
  if (!config.is_object() || !config.contains("quantization_config") || config["quantization_config"].is_null())
    return std::nullopt;
  const json& q = config["quantization_config"];
  NV_CHECK(q.is_object(), source, ": quantization_config must be an object, got ", q.dump());
  const Fields f{q, source};
  Int4QuantConfig c;
  c.source = source;
  NV_CHECK(f.find("quant_method"), source, ": quantization_config has no quant_method");
  c.method = lower(f.string("quant_method", nullptr, ""));
  if (c.method != "gptq" && c.method != "awq")
    NV_THROW(source, ": quantization_config.quant_method '", c.method,
             "' is not supported (pre-quantized checkpoints: gptq and awq, 4-bit; or load the "
             "unquantized model and pass --quantization)");
  int bits = 4;
  f.integer("bits", "w_bit", &bits);
  NV_CHECK(bits == 4, source, ": quantization_config.bits ", bits, " is not supported (", c.method,
           " with 4-bit weights only: the int4 kernels)");
  f.integer("group_size", "q_group_size", &c.group_size);
  NV_CHECK(c.group_size == -1 || c.group_size > 0, source, ": quantization_config.group_size ",
           c.group_size, " must be positive or -1 (one group per row)");
  if (c.method == "gptq") parse_gptq(f, c);
  else parse_awq(f, c);
  return c;
}

std::optional<Int4QuantConfig> read_quant_config(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p = fs::path(model_dir) / "config.json";
  if (!fs::is_directory(model_dir, ec) || !fs::exists(p, ec)) return std::nullopt;
  return parse_quant_config(read_json_file(p.string()), p.string());
}

}  // namespace nanovllm
