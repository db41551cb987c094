// config.json -> ModelConfig. The common fields are parsed here, each architecture's own ones by
// its file in models/arch/. Defaults follow the Hugging Face config classes; anything nanovllm
// cannot run faithfully (other activations, rope scaling types, sliding windows, MLP bias) is an
// error naming the field and value rather than a silently wrong model.
#include "models/model_config.h"

#include "loader/gguf_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/arch/architecture.h"
#include "models/config_fields.h"
#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm {

using json = nlohmann::json;

namespace {

// config.json's `architectures`[0], looked up in the registry.
const Architecture& parse_arch(const nlohmann::json& j, const std::string& where, std::string* written) {
  if (!j.contains("architectures")) NV_THROW("missing required field 'architectures' in ", where);
  const nlohmann::json& a = j["architectures"];
  if (!a.is_array() || a.empty() || !a[0].is_string())
    NV_THROW("field 'architectures' in ", where, " must be a non-empty list of names, got ",
             a.dump());
  *written = a[0].get<std::string>();
  return find_architecture(*written, where);
}

DType parse_torch_dtype(const ConfigFields& f) {
  // transformers >= 5 writes "dtype"; older versions "torch_dtype". Absent: float32, which
  // is also what transformers loads such a checkpoint as.
  const char* key = f.has("torch_dtype") ? "torch_dtype" : f.has("dtype") ? "dtype" : nullptr;
  if (!key) return DType::F32;
  std::string s = f.opt_string(key, "");
  if (s == "float32") return DType::F32;
  if (s == "bfloat16") return DType::BF16;
  if (s == "float16") return DType::F16;
  NV_THROW("unsupported '", key, "' value '", s, "' in ", f.where,
           " (supported: float32, bfloat16, float16)");
}

// rope_scaling (transformers 4) or rope_parameters (transformers 5, which also moves
// rope_theta inside it). `c.rope_theta` is set by the caller before this runs.
void parse_rope(const json& j, const std::string& where, ModelConfig& c) {
  ConfigFields top{j, where, ""};
  const char* key = top.has("rope_scaling") ? "rope_scaling"
                    : top.has("rope_parameters") ? "rope_parameters"
                                                 : nullptr;
  if (!key) return;
  const json& r = j[key];
  if (!r.is_object())
    NV_THROW("field '", key, "' in ", where, " must be an object or null, got ", r.dump());
  // transformers 5 keys rope_parameters by layer type where layers differ (Gemma 3): the
  // architecture's configure() reads those.
  if (r.contains("full_attention") || r.contains("sliding_attention")) return;
  parse_rope_parameters(r, where, key, !top.has("rope_theta"), c);
}

}  // namespace

void parse_rope_parameters(const nlohmann::json& r, const std::string& where, const std::string& key,
                           bool theta_inside, ModelConfig& c) {
  if (!r.is_object())
    NV_THROW("field '", key, "' in ", where, " must be an object or null, got ", r.dump());
  ConfigFields f{r, where, key + "."};
  if (theta_inside && f.has("rope_theta")) c.rope_theta = f.req_pos_number("rope_theta");
  const char* tkey = f.has("rope_type") ? "rope_type" : "type";
  std::string type = f.opt_string(tkey, "default");
  RopeScaling& s = c.rope_scaling;
  s.type = type;
  if (type == "default") return;
  if (type == "linear") {
    s.factor = f.req_pos_number("factor");
    return;
  }
  if (type == "llama3") {
    s.factor = f.req_pos_number("factor");
    s.low_freq_factor = f.req_pos_number("low_freq_factor");
    s.high_freq_factor = f.req_pos_number("high_freq_factor");
    s.original_max_position_embeddings = f.req_pos_int("original_max_position_embeddings");
    if (!(s.high_freq_factor > s.low_freq_factor))
      NV_THROW("field '", key, ".high_freq_factor' (", s.high_freq_factor, ") must exceed '", key,
               ".low_freq_factor' (", s.low_freq_factor, ") in ", where);
    return;
  }
  if (type == "yarn") {
    // transformers 5 (_compute_yarn_parameters): an explicit factor wins; without one it is
    // max_position_embeddings / original_max_position_embeddings (which then must be given).
    s.original_max_position_embeddings =
        f.opt_pos_int("original_max_position_embeddings", c.max_position_embeddings);
    if (f.has("factor")) {
      s.factor = f.req_pos_number("factor");
    } else {
      if (!f.has("original_max_position_embeddings"))
        NV_THROW("missing required field '", key, ".factor' in ", where,
                 " (yarn needs 'factor' or 'original_max_position_embeddings')");
      s.factor = double(c.max_position_embeddings) / s.original_max_position_embeddings;
    }
    s.beta_fast = f.has("beta_fast") ? f.req_pos_number("beta_fast") : 32.0;
    s.beta_slow = f.has("beta_slow") ? f.req_pos_number("beta_slow") : 1.0;
    if (!(s.beta_fast > s.beta_slow))
      NV_THROW("field '", key, ".beta_fast' (", s.beta_fast, ") must exceed '", key,
               ".beta_slow' (", s.beta_slow, ") in ", where);
    s.truncate = f.opt_bool("truncate", true);
    // mscale(scale, m) = 0.1 * m * ln(scale) + 1 for scale > 1 (the paper's sqrt(1/t)).
    auto mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    if (f.has("attention_factor")) {
      s.attention_factor = f.req_pos_number("attention_factor");
    } else {
      double m = f.has("mscale") ? f.req_pos_number("mscale") : 0.0;
      double m_all = f.has("mscale_all_dim") ? f.req_pos_number("mscale_all_dim") : 0.0;
      s.attention_factor = (m != 0 && m_all != 0) ? mscale(s.factor, m) / mscale(s.factor, m_all)
                                                  : mscale(s.factor, 1.0);
    }
    return;
  }
  NV_THROW("unsupported rope scaling: field '", key, ".", tkey, "' is '", type, "' in ", where,
           " (supported: default, linear, llama3, yarn)");
}

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& where) {
  const json j = parse_json(text, where);
  if (!j.is_object()) NV_THROW("", where, " is not a JSON object");
  ConfigFields f{j, where, ""};
  ModelConfig c;
  c.arch = &parse_arch(j, where, &c.architecture);
  c.model_type = f.opt_string("model_type", "");

  c.hidden_size = f.req_pos_int("hidden_size");
  c.intermediate_size = f.req_pos_int("intermediate_size");
  c.num_hidden_layers = f.req_pos_int("num_hidden_layers");
  c.num_attention_heads = f.req_pos_int("num_attention_heads");
  c.num_key_value_heads = f.opt_pos_int("num_key_value_heads", c.num_attention_heads);
  c.vocab_size = f.req_pos_int("vocab_size");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    NV_THROW("num_attention_heads (", c.num_attention_heads,
             ") is not a multiple of num_key_value_heads (", c.num_key_value_heads, ") in ", where);
  if (f.has("head_dim")) {
    c.head_dim = f.req_pos_int("head_dim");
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      NV_THROW("hidden_size (", c.hidden_size, ") is not divisible by num_attention_heads (",
               c.num_attention_heads, ") and there is no 'head_dim' in ", where);
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) NV_THROW("head_dim ", c.head_dim, " must be even for rotary embeddings in ", where);

  c.rms_norm_eps = f.opt_pos_number("rms_norm_eps", 1e-6);
  c.rope_theta = f.opt_pos_number("rope_theta", 10000.0);
  c.max_position_embeddings =
      f.opt_pos_int("max_position_embeddings", c.arch->default_max_position_embeddings);
  parse_rope(j, where, c);  // yarn's defaults read max_position_embeddings
  if (j.contains("rope_freq_factors") && !j["rope_freq_factors"].is_null()) {
    const json& ff = j["rope_freq_factors"];
    if (!ff.is_array() || int64_t(ff.size()) != c.head_dim / 2)
      NV_THROW("field 'rope_freq_factors' in ", where, " must be an array of head_dim / 2 = ",
               c.head_dim / 2, " numbers");
    for (const json& v : ff) {
      if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
        NV_THROW("field 'rope_freq_factors' in ", where, " holds ", v.dump(),
                 ": every factor must be a positive finite number");
      c.rope_freq_factors.push_back(v.get<double>());
    }
    if (c.rope_scaling.type != "default")
      NV_THROW("'rope_freq_factors' together with rope scaling '", c.rope_scaling.type, "' in ",
               where, " is not supported");
  }
  c.tie_word_embeddings = f.opt_bool("tie_word_embeddings", false);
  c.torch_dtype = parse_torch_dtype(f);

  c.hidden_act = f.opt_string("hidden_act", "silu");
  c.arch->configure(f, c);  // the architecture's own fields and block options (may set hidden_act)
  if (c.hidden_act == "swish") c.hidden_act = "silu";  // same function in transformers
  if (c.hidden_act != "silu" && c.hidden_act != "gelu_pytorch_tanh")
    NV_THROW("unsupported 'hidden_act' value '", c.hidden_act, "' in ", where,
             " (supported: silu, gelu_pytorch_tanh)");
  if (!c.layer_sliding_window.empty() &&
      c.layer_sliding_window.size() != size_t(c.num_hidden_layers))
    NV_THROW("internal: ", c.layer_sliding_window.size(), " sliding windows for ", c.num_hidden_layers,
             " layers in ", where);

  c.eos_token_ids = f.id_list("eos_token_id");
  std::vector<int> bos = f.id_list("bos_token_id");
  c.bos_token_id = bos.empty() ? -1 : bos[0];
  return c;
}

namespace {
std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) NV_THROW("cannot read '", p.string(), "'");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}
}  // namespace

ModelConfig ModelConfig::from_dir(const std::string& model_dir) {
  namespace fs = std::filesystem;
  fs::path dir(model_dir);
  std::error_code ec;
  if (is_gguf_model(model_dir)) {  // GGUF: its metadata, read as the equivalent config.json
    auto g = GgufCheckpoint::open(model_dir);
    return from_json_text(g->hf_config_json(), g->path());
  }
  if (!fs::is_directory(dir, ec)) NV_THROW("model directory '", model_dir, "' does not exist");
  fs::path cfg = dir / "config.json";
  if (!fs::exists(cfg, ec)) NV_THROW("no config.json in model directory '", model_dir, "'");
  ModelConfig c = from_json_text(read_file(cfg), cfg.string());

  // generation_config.json lists the ids generation actually stops on (Qwen3: im_end and
  // endoftext); add them after config.json's own, keeping order and dropping duplicates.
  fs::path gen = dir / "generation_config.json";
  if (fs::exists(gen, ec)) {
    const json g = parse_json(read_file(gen), gen.string());
    if (g.is_object()) {
      std::string where = gen.string();
      ConfigFields f{g, where, ""};
      for (int id : f.id_list("eos_token_id"))
        if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end())
          c.eos_token_ids.push_back(id);
      if (c.bos_token_id < 0) {
        std::vector<int> bos = f.id_list("bos_token_id");
        if (!bos.empty()) c.bos_token_id = bos[0];
      }
    }
  }
  return c;
}

std::vector<double> rope_inv_freq(const ModelConfig& c) {
  NV_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, "rope_inv_freq: head_dim ", c.head_dim);
  const int half = c.head_dim / 2;
  std::vector<double> f(static_cast<size_t>(half));
  // Frequency of pair i: theta^(-2i/D).
  for (int i = 0; i < half; ++i) f[size_t(i)] = 1.0 / std::pow(c.rope_theta, 2.0 * i / c.head_dim);

  const RopeScaling& s = c.rope_scaling;
  if (!c.rope_freq_factors.empty()) {  // llama.cpp's freq_factors: theta / factor per pair
    NV_CHECK(int(c.rope_freq_factors.size()) == half, "rope_freq_factors has ",
             c.rope_freq_factors.size(), " entries for head_dim ", c.head_dim);
    for (int i = 0; i < half; ++i) f[size_t(i)] /= c.rope_freq_factors[size_t(i)];
  }
  if (s.type == "default") return f;
  if (s.type == "linear") {
    for (auto& x : f) x /= s.factor;  // positions stretched by `factor`
    return f;
  }
  if (s.type == "llama3") {
    // Llama 3.1 scaling: wavelengths longer than old_ctx / low_freq_factor are slowed down by
    // `factor`; wavelengths shorter than old_ctx / high_freq_factor stay; in between, blend
    // linearly in (old_ctx / wavelength) between the two.
    const double old_ctx = s.original_max_position_embeddings;
    const double long_wl = old_ctx / s.low_freq_factor;   // beyond: fully scaled
    const double short_wl = old_ctx / s.high_freq_factor;  // below: untouched
    for (auto& x : f) {
      double wl = 2.0 * M_PI / x;
      if (wl > long_wl) {
        x /= s.factor;
      } else if (wl >= short_wl) {
        double t = (old_ctx / wl - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        x = (1.0 - t) * x / s.factor + t * x;
      }
    }
    return f;
  }
  if (s.type == "yarn") {
    // YaRN: dimensions that rotate more than beta_fast times over the original context keep
    // their frequency (extrapolate), those rotating fewer than beta_slow times are divided by
    // `factor` (interpolate), and a linear ramp over dimension index blends the band between.
    const double d = c.head_dim, base = c.rope_theta, ctx = s.original_max_position_embeddings;
    // The dimension index whose wavelength fits `rotations` times into the original context.
    auto correction_dim = [&](double rotations) {
      return d * std::log(ctx / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
    };
    double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
    if (s.truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0);
    high = std::min(high, d - 1);
    if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
    for (int i = 0; i < half; ++i) {
      double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);  // 0: extrapolate, 1: interpolate
      double extrapolation = 1.0 - ramp;
      f[size_t(i)] = f[size_t(i)] / s.factor * (1.0 - extrapolation) + f[size_t(i)] * extrapolation;
    }
    return f;
  }
  NV_THROW("rope_inv_freq: unsupported rope scaling type '", s.type, "'");
}

double rope_attention_factor(const ModelConfig& c) {
  return c.rope_scaling.type == "yarn" ? c.rope_scaling.attention_factor : 1.0;
}

int ModelConfig::max_context_len() const {
  if (rope_scaling.type == "yarn") {
    double n = double(rope_scaling.original_max_position_embeddings) * rope_scaling.factor;
    return n >= 2147483647.0 ? 2147483647 : std::max(int(n), max_position_embeddings);
  }
  return max_position_embeddings;
}

}  // namespace nanovllm
