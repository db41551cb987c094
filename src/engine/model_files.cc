#include "engine/model_files.h"

#include <filesystem>

#include "loader/gguf_checkpoint.h"
#include "loader/gguf_quants.h"

#include <map>
#include "tokenizer/gguf_vocab.h"
#include "util/check.h"

namespace nanovllm {

namespace fs = std::filesystem;

void check_model_path(const std::string& model) {
  std::error_code ec;
  if (is_gguf_model(model)) return;
  if (fs::is_regular_file(model, ec))
    NV_THROW("model '", model, "' is a file but not a GGUF model (*.gguf); pass a Hugging Face "
             "model directory or a .gguf file");
  if (!fs::is_directory(model, ec)) NV_THROW("model directory '", model, "' does not exist");
  NV_CHECK(fs::exists(fs::path(model) / "config.json"), "model directory '", model,
           "' has no config.json (and no .gguf file)");
}

namespace {

std::optional<int> opt_id(const GgufFile& m, const std::string& key) {
  if (!m.has(key)) return std::nullopt;
  return int(m.get_int(key));
}
std::optional<bool> opt_bool(const GgufFile& m, const std::string& key) {
  if (!m.has(key)) return std::nullopt;
  return m.get_bool(key, false);
}

GgufVocab gguf_vocab(const GgufFile& m) {
  GgufVocab v;
  v.model = m.get_string("tokenizer.ggml.model");
  v.pre = m.get_string("tokenizer.ggml.pre", "");
  v.tokens = m.get_string_array("tokenizer.ggml.tokens");
  if (m.has("tokenizer.ggml.scores"))
    for (double s : m.get_float_array("tokenizer.ggml.scores")) v.scores.push_back(float(s));
  if (m.has("tokenizer.ggml.token_type"))
    for (int64_t t : m.get_int_array("tokenizer.ggml.token_type")) v.token_types.push_back(int32_t(t));
  if (m.has("tokenizer.ggml.merges")) v.merges = m.get_string_array("tokenizer.ggml.merges");
  v.bos_id = opt_id(m, "tokenizer.ggml.bos_token_id");
  v.eos_id = opt_id(m, "tokenizer.ggml.eos_token_id");
  v.unk_id = opt_id(m, "tokenizer.ggml.unknown_token_id");
  v.pad_id = opt_id(m, "tokenizer.ggml.padding_token_id");
  v.eot_id = opt_id(m, "tokenizer.ggml.eot_token_id");
  v.eom_id = opt_id(m, "tokenizer.ggml.eom_token_id");
  v.add_bos = opt_bool(m, "tokenizer.ggml.add_bos_token");
  v.add_eos = opt_bool(m, "tokenizer.ggml.add_eos_token");
  v.add_space_prefix = opt_bool(m, "tokenizer.ggml.add_space_prefix");
  v.chat_template = m.get_string("tokenizer.chat_template", "");
  return v;
}

}  // namespace

namespace {

// The engine scheme a ggml type runs on (model_files.h has the table).
const char* scheme_of(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return "int4-g32";
    case GgmlType::Q4_1: case GgmlType::Q4_K: return "int4-g32-zp";
    case GgmlType::Q8_0: case GgmlType::Q5_0: case GgmlType::IQ4_NL:  // exact (quantize.cc)
    case GgmlType::Q5_1: case GgmlType::IQ4_XS: case GgmlType::Q2_K: case GgmlType::Q3_K:
      return "int8-g32";
    case GgmlType::Q5_K: case GgmlType::Q6_K: return "int8";
    default: return "none";
  }
}

// A scheme of the table above parsed; int8-g32 searches coarser exact grids
// (QuantScheme::exact_grid), which makes Q5_0 lossless.
QuantScheme gguf_scheme(const std::string& name) {
  QuantScheme q = parse_quant_scheme(name);
  q.exact_grid = q.int8_groups();
  return q;
}

// The linear weights: 2-D (or stacked experts), not the embedding.
bool is_linear(const std::string& name, const GgufTensor& t) {
  return t.ne.size() >= 2 && name != "model.embed_tokens.weight";
}

}  // namespace

QuantScheme gguf_default_quantization(const std::string& model) {
  if (!is_gguf_model(model)) return {};
  auto ck = GgufCheckpoint::open(model);
  // Parameters per target scheme over the linear weights.
  std::map<std::string, int64_t> by_scheme;
  for (const auto& [name, r] : ck->tensors()) {
    if (!is_linear(name, *r.t)) continue;
    by_scheme[scheme_of(GgmlType(r.t->type))] += r.expert >= 0 ? r.t->ne[0] * r.t->ne[1] : r.t->numel();
  }
  std::string best = "none";
  int64_t most = -1;
  for (const auto& [s, n] : by_scheme)
    if (n > most) best = s, most = n;
  return gguf_scheme(best);
}

std::map<std::string, QuantScheme> gguf_tensor_quantization(const std::string& model) {
  std::map<std::string, QuantScheme> out;
  if (!is_gguf_model(model)) return out;
  auto ck = GgufCheckpoint::open(model);
  for (const auto& [name, r] : ck->tensors())
    if (is_linear(name, *r.t)) out[name] = gguf_scheme(scheme_of(GgmlType(r.t->type)));
  return out;
}

QuantScheme gguf_lm_head_quantization(const std::string& model) {
  if (!is_gguf_model(model)) return {};
  auto ck = GgufCheckpoint::open(model);
  const std::string head = ck->tensors().count("lm_head.weight") ? "lm_head.weight" : "model.embed_tokens.weight";
  if (ck->int4_bits(head) == 6) return parse_quant_scheme("int6-g16-k");
  if (ck->int4_bits(head) == 5)  // Q5_K, or Q5_1 (no superblocks)
    return parse_quant_scheme(ck->tensors().at(head).t->type == uint32_t(GgmlType::Q5_1) ? "int5-g32-zp"
                                                                                          : "int5-g32-zp-k");
  if (ck->int4_bits(head) == 2) return parse_quant_scheme("int2-g16-zp-k");
  if (ck->int4_bits(head) == 3) return parse_quant_scheme("int3-g16-k");
  return {};
}

std::unique_ptr<Tokenizer> load_model_tokenizer(const std::string& model) {
  std::vector<std::string> files = gguf_model_files(model);
  if (files.empty()) {
    if (!fs::exists(fs::path(model) / "tokenizer.json")) return nullptr;
    return Tokenizer::from_dir(model);
  }
  const fs::path dir = fs::path(files[0]).parent_path();
  if (fs::exists(dir / "tokenizer.json")) return Tokenizer::from_dir(dir.string());
  auto f = GgufFile::open(files[0]);
  if (!f->has("tokenizer.ggml.model")) return nullptr;
  return Tokenizer::from_gguf_vocab(gguf_vocab(*f), files[0]);
}

}  // namespace nanovllm
