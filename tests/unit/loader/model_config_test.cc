// config.json parsing and rotary frequencies.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "models/arch/architecture.h"
#include "models/model_config.h"
#include "test_util.h"


namespace nanovllm {
namespace {

using test::expect_error;

const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": false,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "intermediate_size": 3072, "max_position_embeddings": 40960,
  "max_window_layers": 28, "num_attention_heads": 16, "num_hidden_layers": 28,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
  "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "use_sliding_window": false, "vocab_size": 151936})";

// Replaces (or with value "" removes) one top-level field of a JSON text.
std::string with(const std::string& text, const std::string& key, const std::string& value) {
  auto j = nlohmann::json::parse(text);
  if (value.empty()) j.erase(key);
  else j[key] = nlohmann::json::parse(value);
  return j.dump();
}

TEST(ModelConfig, Qwen3) {
  auto c = ModelConfig::from_json_text(kQwen3, "q3/config.json");
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // not hidden / heads = 64
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.torch_dtype, DType::BF16);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{151645});
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.arch->model_type, "qwen3");
}

TEST(ModelConfig, DefaultsAndAlternateSpellings) {
  // transformers 5: "dtype", rope_theta inside rope_parameters; no head_dim, no kv heads.
  std::string t = with(kQwen3, "torch_dtype", "");
  t = with(t, "dtype", R"("float16")");
  t = with(t, "rope_theta", "");
  t = with(t, "rope_scaling", "");
  t = with(t, "rope_parameters", R"({"rope_theta": 5000.0, "rope_type": "default"})");
  t = with(t, "head_dim", "null");
  t = with(t, "num_key_value_heads", "");
  t = with(t, "eos_token_id", "[1, 2]");
  t = with(t, "bos_token_id", "null");
  t = with(t, "tie_word_embeddings", "");
  auto c = ModelConfig::from_json_text(t, "x");
  EXPECT_EQ(c.torch_dtype, DType::F16);
  EXPECT_DOUBLE_EQ(c.rope_theta, 5000.0);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_key_value_heads, 16);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{1, 2}));
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_FALSE(c.tie_word_embeddings);

  auto q2 = ModelConfig::from_json_text(
      with(with(kQwen3, "architectures", R"(["Qwen2ForCausalLM"])"), "attention_bias", "false"),
      "x");
  EXPECT_EQ(q2.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(q2.attention_bias);  // Qwen2 always has q/k/v bias
  EXPECT_FALSE(q2.qk_norm);

  auto ll = ModelConfig::from_json_text(
      with(with(kQwen3, "architectures", R"(["LlamaForCausalLM"])"), "attention_bias", "true"),
      "x");
  EXPECT_EQ(ll.architecture, "LlamaForCausalLM");
  EXPECT_TRUE(ll.attention_bias);
  EXPECT_FALSE(ll.qk_norm);
}

TEST(ModelConfig, RopeScalingVariants) {
  auto lin = ModelConfig::from_json_text(
      with(kQwen3, "rope_scaling", R"({"type": "linear", "factor": 2.0})"), "x");
  EXPECT_EQ(lin.rope_scaling.type, "linear");
  EXPECT_DOUBLE_EQ(lin.rope_scaling.factor, 2.0);
  auto l3 = ModelConfig::from_json_text(
      with(kQwen3, "rope_scaling",
           R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"),
      "x");
  EXPECT_EQ(l3.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(l3.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(l3.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(l3.rope_scaling.original_max_position_embeddings, 8192);
}

// Qwen3-30B-A3B's config.json fields; then decoder_sparse_step and mlp_only_layers.
TEST(ModelConfig, Qwen3Moe) {
  std::string t = with(kQwen3, "architectures", R"(["Qwen3MoeForCausalLM"])");
  t = with(t, "model_type", R"("qwen3_moe")");
  t = with(t, "num_hidden_layers", "6");
  t = with(t, "num_experts", "128");
  t = with(t, "num_experts_per_tok", "8");
  t = with(t, "moe_intermediate_size", "768");
  t = with(t, "norm_topk_prob", "true");
  t = with(t, "decoder_sparse_step", "1");
  t = with(t, "mlp_only_layers", "[]");
  auto c = ModelConfig::from_json_text(t, "x");
  EXPECT_EQ(c.arch->model_type, "qwen3_moe");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.moe_layers, std::vector<bool>(6, true));
  // Sparse where (l + 1) % 2 == 0 and l not in [3]: layers 1 and 5.
  auto s = ModelConfig::from_json_text(with(with(t, "decoder_sparse_step", "2"), "mlp_only_layers", "[3]"), "x");
  EXPECT_EQ(s.moe_layers, (std::vector<bool>{false, true, false, false, false, true}));
  EXPECT_FALSE(s.is_moe_layer(0));
  EXPECT_TRUE(s.is_moe_layer(5));
  EXPECT_FALSE(s.is_moe_layer(6));
  // transformers' defaults when absent: 128 experts, 8 per token, 768, no renormalization.
  auto d = ModelConfig::from_json_text(with(with(with(with(t, "num_experts", ""), "num_experts_per_tok", ""),
                                                 "moe_intermediate_size", ""), "norm_topk_prob", ""), "x");
  EXPECT_EQ(d.num_experts, 128);
  EXPECT_EQ(d.num_experts_per_tok, 8);
  EXPECT_FALSE(d.norm_topk_prob);
  expect_error([&] { ModelConfig::from_json_text(with(t, "num_experts_per_tok", "200"), "c.json"); },
               {"'num_experts_per_tok' (200)", "'num_experts' (128)", "c.json"});
  expect_error([&] { ModelConfig::from_json_text(with(t, "mlp_only_layers", "[0, 6]"), "c.json"); },
               {"'mlp_only_layers'", "[0, 6)"});
  expect_error([&] { ModelConfig::from_json_text(with(t, "num_experts", "0"), "c.json"); },
               {"'num_experts'", "positive"});
}

// Qwen3's documented YaRN setting: factor 4 over a 32768 pre-training context; the model then
// takes 131072 tokens (vLLM's rule), not max_position_embeddings (40960).
TEST(ModelConfig, Yarn) {
  auto y = ModelConfig::from_json_text(
      with(kQwen3, "rope_scaling",
           R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})"),
      "x");
  EXPECT_EQ(y.rope_scaling.type, "yarn");
  EXPECT_DOUBLE_EQ(y.rope_scaling.factor, 4.0);
  EXPECT_DOUBLE_EQ(y.rope_scaling.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(y.rope_scaling.beta_slow, 1.0);
  EXPECT_NEAR(y.rope_scaling.attention_factor, 1.0 + 0.1 * std::log(4.0), 1e-15);
  EXPECT_NEAR(rope_attention_factor(y), 1.0 + 0.1 * std::log(4.0), 1e-15);
  EXPECT_EQ(y.max_context_len(), 131072);
  // No factor: max_position_embeddings / original (40960 / 10240 = 4); no original: the model's.
  auto implicit = ModelConfig::from_json_text(
      with(kQwen3, "rope_scaling", R"({"type": "yarn", "original_max_position_embeddings": 10240})"), "x");
  EXPECT_DOUBLE_EQ(implicit.rope_scaling.factor, 4.0);
  auto no_orig = ModelConfig::from_json_text(
      with(kQwen3, "rope_scaling", R"({"rope_type": "yarn", "factor": 2.0})"), "x");
  EXPECT_EQ(no_orig.rope_scaling.original_max_position_embeddings, 40960);
  EXPECT_EQ(no_orig.max_context_len(), 81920);
  // mscale / mscale_all_dim (DeepSeek's form): the ratio of the two magnitudes.
  auto ms = ModelConfig::from_json_text(
      with(kQwen3, "rope_scaling",
           R"({"rope_type": "yarn", "factor": 4.0, "mscale": 2.0, "mscale_all_dim": 1.0})"),
      "x");
  EXPECT_NEAR(ms.rope_scaling.attention_factor, (1 + 0.2 * std::log(4.0)) / (1 + 0.1 * std::log(4.0)), 1e-15);
  auto af = ModelConfig::from_json_text(
      with(kQwen3, "rope_scaling", R"({"rope_type": "yarn", "factor": 4.0, "attention_factor": 0.5})"), "x");
  EXPECT_DOUBLE_EQ(af.rope_scaling.attention_factor, 0.5);
  EXPECT_EQ(ModelConfig::from_json_text(kQwen3, "x").max_context_len(), 40960);
  EXPECT_DOUBLE_EQ(rope_attention_factor(ModelConfig::from_json_text(kQwen3, "x")), 1.0);
}

// Mistral: transformers' MistralConfig default window (4096) when the field is absent, none
// when null, the given one on every layer otherwise.
TEST(ModelConfig, MistralSlidingWindow) {
  const std::string m = with(with(with(kQwen3, "architectures", R"(["MistralForCausalLM"])"),
                                  "model_type", R"("mistral")"), "sliding_window", "");
  auto absent = ModelConfig::from_json_text(m, "x");
  EXPECT_FALSE(absent.qk_norm);
  ASSERT_EQ(absent.layer_sliding_window.size(), 28u);
  EXPECT_EQ(absent.sliding_window(0), 4096);
  EXPECT_EQ(absent.sliding_window(27), 4096);
  EXPECT_TRUE(ModelConfig::from_json_text(with(m, "sliding_window", "null"), "x").layer_sliding_window.empty());
  EXPECT_EQ(ModelConfig::from_json_text(with(m, "sliding_window", "32"), "x").sliding_window(5), 32);
  expect_error([&] { ModelConfig::from_json_text(with(m, "sliding_window", "-3"), "c.json"); },
               {"sliding_window", "-3", "c.json"});
}

// Gemma 3 1B's config.json as transformers 4 writes it, and the transformers 5 form with
// rope_parameters keyed by layer type.
const char* kGemma3 = R"({
  "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "attention_bias": false,
  "attn_logit_softcapping": null, "bos_token_id": 2, "eos_token_id": [1, 106],
  "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 1152, "intermediate_size": 6912, "max_position_embeddings": 32768,
  "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
  "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": 512,
  "sliding_window_pattern": 6, "torch_dtype": "bfloat16", "vocab_size": 262144})";

TEST(ModelConfig, Gemma3) {
  auto c = ModelConfig::from_json_text(kGemma3, "g/config.json");
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(c.tie_word_embeddings);  // Gemma3TextConfig's default
  EXPECT_TRUE(c.qk_norm && c.norm_weight_offset && c.sandwich_norm && c.scale_embeddings);
  EXPECT_DOUBLE_EQ(c.attention_scale, 1.0 / 16);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rope_local_theta, 1e4);
  ASSERT_EQ(c.layer_sliding_window.size(), 26u);
  for (int l = 0; l < 26; ++l) EXPECT_EQ(c.sliding_window(l), (l + 1) % 6 ? 512 : 0) << l;
  // Explicit layer_types win over the pattern.
  std::string types = "[";
  for (int l = 0; l < 26; ++l) types += std::string(l ? "," : "") + (l == 3 ? "\"full_attention\"" : "\"sliding_attention\"");
  auto t = ModelConfig::from_json_text(with(kGemma3, "layer_types", types + "]"), "x");
  for (int l = 0; l < 26; ++l) EXPECT_EQ(t.sliding_window(l), l == 3 ? 0 : 512) << l;
  // transformers 5: rope_parameters per layer type (global: linear x8 as in Gemma 3 4B+).
  std::string v5 = with(with(with(kGemma3, "rope_theta", ""), "rope_local_base_freq", ""), "rope_scaling", "");
  v5 = with(v5, "rope_parameters", R"({"full_attention": {"rope_type": "linear", "factor": 8.0,
      "rope_theta": 1000000.0}, "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})");
  auto r = ModelConfig::from_json_text(v5, "x");
  EXPECT_EQ(r.rope_scaling.type, "linear");
  EXPECT_DOUBLE_EQ(r.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(r.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(r.rope_local_theta, 1e4);
  // Refused: soft-capping, bidirectional attention, a bad layer type, another activation.
  expect_error([&] { ModelConfig::from_json_text(with(kGemma3, "final_logit_softcapping", "30.0"), "c.json"); },
               {"final_logit_softcapping", "30", "c.json"});
  expect_error([&] { ModelConfig::from_json_text(with(kGemma3, "attn_logit_softcapping", "50.0"), "c.json"); },
               {"attn_logit_softcapping", "c.json"});
  expect_error([&] { ModelConfig::from_json_text(with(kGemma3, "use_bidirectional_attention", "true"), "c.json"); },
               {"use_bidirectional_attention", "c.json"});
  expect_error([&] { ModelConfig::from_json_text(with(kGemma3, "layer_types", R"(["chunked_attention"])"), "c.json"); },
               {"layer_types", "26", "c.json"});
  expect_error([&] { ModelConfig::from_json_text(with(kGemma3, "hidden_activation", R"("relu")"), "c.json"); },
               {"hidden_act", "relu", "c.json"});
}

// The README's "Supported models" table is the registry: a new src/models/arch/ file without its
// docs row (or a row without a file) fails here. An unknown name's error lists every one.
TEST(ArchitectureRegistry, ReadmeTableMatchesRegistry) {
  std::ifstream in(std::string(NANOVLLM_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in) << "README.md not found under " << NANOVLLM_SOURCE_DIR;
  std::set<std::pair<std::string, std::string>> documented, registered;
  std::string line;
  bool in_section = false;
  std::regex row(R"(^\| `([A-Za-z0-9]+)` \| ([a-z0-9_]+) \|)");
  while (std::getline(in, line)) {
    if (line.rfind("### ", 0) == 0 || line.rfind("## ", 0) == 0) in_section = line == "### Supported models";
    std::smatch m;
    if (in_section && std::regex_search(line, m, row)) documented.emplace(m[1], m[2]);
  }
  for (const Architecture* a : architectures()) registered.emplace(a->name, a->model_type);
  EXPECT_GE(registered.size(), 3u);
  EXPECT_EQ(documented, registered);
  for (const Architecture* a : architectures()) {
    EXPECT_EQ(&find_architecture(a->name, "x"), a);
    EXPECT_EQ(find_architecture_by_model_type(a->model_type), a);
  }
  EXPECT_EQ(find_architecture_by_model_type("no-such-type"), nullptr);
  std::vector<std::string> want{"Nope", "x.json"};
  for (const Architecture* a : architectures()) want.push_back(a->name);
  expect_error([] { find_architecture("Nope", "x.json"); }, want);
}

TEST(ModelConfig, Errors) {
  expect_error([] { ModelConfig::from_json_text(with(kQwen3, "hidden_size", ""), "c.json"); },
               {"missing required field 'hidden_size'", "c.json"});
  expect_error([] { ModelConfig::from_json_text(with(kQwen3, "vocab_size", ""), "c.json"); },
               {"'vocab_size'"});
  expect_error(
      [] {
        ModelConfig::from_json_text(with(kQwen3, "architectures", R"(["Gemma2ForCausalLM"])"),
                                    "c.json");
      },
      {"'architectures'", "Gemma2ForCausalLM", "c.json"});
  expect_error([] { ModelConfig::from_json_text(with(kQwen3, "architectures", ""), "c.json"); },
               {"'architectures'"});
  expect_error(
      [] { ModelConfig::from_json_text(with(kQwen3, "hidden_act", R"("gelu")"), "c.json"); },
      {"'hidden_act'", "gelu"});
  expect_error(
      [] {
        ModelConfig::from_json_text(
            with(kQwen3, "rope_scaling", R"({"rope_type": "dynamic", "factor": 4.0})"), "c.json");
      },
      {"rope_scaling.rope_type", "dynamic", "yarn"});
  expect_error(
      [] {
        ModelConfig::from_json_text(
            with(kQwen3, "rope_scaling", R"({"rope_type": "yarn", "factor": 2, "beta_fast": 1, "beta_slow": 2})"),
            "c.json");
      },
      {"rope_scaling.beta_fast", "c.json"});
  expect_error(
      [] {
        ModelConfig::from_json_text(with(kQwen3, "rope_scaling", R"({"rope_type": "yarn"})"), "c.json");
      },
      {"rope_scaling.factor"});
  expect_error(
      [] {
        ModelConfig::from_json_text(with(kQwen3, "rope_scaling", R"({"rope_type": "llama3"})"),
                                    "c.json");
      },
      {"missing required field 'rope_scaling.factor'"});
  expect_error(
      [] { ModelConfig::from_json_text(with(kQwen3, "torch_dtype", R"("float64")"), "c.json"); },
      {"'torch_dtype'", "float64"});
  expect_error(
      [] { ModelConfig::from_json_text(with(kQwen3, "num_hidden_layers", "-3"), "c.json"); },
      {"'num_hidden_layers'", "-3"});
  expect_error(
      [] { ModelConfig::from_json_text(with(kQwen3, "num_key_value_heads", "3"), "c.json"); },
      {"num_key_value_heads"});
  expect_error(
      [] { ModelConfig::from_json_text(with(kQwen3, "use_sliding_window", "true"), "c.json"); },
      {"use_sliding_window"});
  expect_error([] { ModelConfig::from_json_text("{\"a\": ", "c.json"); },
               {"malformed JSON", "c.json"});
  expect_error([] { ModelConfig::from_dir("/nonexistent/model"); }, {"/nonexistent/model"});
}

TEST(ModelConfig, FromDirMergesGenerationConfig) {
  test::TempDir d;
  test::write_bytes(d / "config.json", kQwen3);
  test::write_bytes(d / "generation_config.json",
                    R"({"bos_token_id": 151643, "eos_token_id": [151645, 151643]})");
  auto c = ModelConfig::from_dir(d.path.string());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{151645, 151643}));
  expect_error([&] { ModelConfig::from_dir((d.path / "sub").string()); }, {"does not exist"});
}

// Expected values derived by hand from inv_freq[i] = theta^(-2i/D): with D = 8 and
// theta = 10000, the frequencies are exactly 10^-i.
TEST(RopeInvFreq, DefaultAndLinear) {
  ModelConfig c;
  c.head_dim = 8;
  c.rope_theta = 10000;
  auto f = rope_inv_freq(c);
  ASSERT_EQ(f.size(), 4u);
  const double want[4] = {1.0, 0.1, 0.01, 0.001};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[size_t(i)], want[i], 1e-15) << i;
  c.rope_scaling.type = "linear";
  c.rope_scaling.factor = 4;
  f = rope_inv_freq(c);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[size_t(i)], want[i] / 4, 1e-15) << i;
}

// Llama-3 scaling with old context 1000, low/high freq factors 1 and 4, factor 8: wavelength
// thresholds are 1000 (beyond: divide by 8) and 250 (below: keep). Wavelengths 2*pi/f are
// 6.28, 62.8, 628.3, 6283: pairs 0 and 1 keep, pair 3 is divided by 8, pair 2 is blended with
// s = (1000 / 628.3 - 1) / (4 - 1) = (10 / (2 pi) - 1) / 3 = 0.197183..., giving
// 0.01 * ((1 - s) / 8 + s) = 0.0029753525068469...
TEST(RopeInvFreq, Llama3) {
  ModelConfig c;
  c.head_dim = 8;
  c.rope_theta = 10000;
  c.rope_scaling.type = "llama3";
  c.rope_scaling.factor = 8;
  c.rope_scaling.low_freq_factor = 1;
  c.rope_scaling.high_freq_factor = 4;
  c.rope_scaling.original_max_position_embeddings = 1000;
  auto f = rope_inv_freq(c);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_NEAR(f[0], 1.0, 1e-15);
  EXPECT_NEAR(f[1], 0.1, 1e-15);
  EXPECT_NEAR(f[2], 0.0029753525068469478, 1e-15);
  EXPECT_NEAR(f[3], 0.001 / 8, 1e-15);
}

// GGUF's rope_freqs (config key rope_freq_factors): pair i turns at theta^(-2i/D) / factor[i];
// the Llama-3 factors of the test above reproduce its frequencies.
TEST(RopeInvFreq, FreqFactors) {
  ModelConfig c;
  c.head_dim = 8;
  c.rope_theta = 10000;
  c.rope_freq_factors = {1.0, 1.0, 0.01 / 0.0029753525068469478, 8.0};
  auto f = rope_inv_freq(c);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_NEAR(f[0], 1.0, 1e-15);
  EXPECT_NEAR(f[1], 0.1, 1e-15);
  EXPECT_NEAR(f[2], 0.0029753525068469478, 1e-15);
  EXPECT_NEAR(f[3], 0.001 / 8, 1e-15);

  // From config text: 64 factors for head_dim 128; wrong count, non-positive or with a rope
  // scaling type: errors naming the field.
  std::string factors = "[";
  for (int i = 0; i < 64; ++i) factors += (i ? ", " : "") + std::to_string(1.0 + i / 8.0);
  const auto parsed = ModelConfig::from_json_text(with(kQwen3, "rope_freq_factors", factors + "]"), "x");
  ASSERT_EQ(parsed.rope_freq_factors.size(), 64u);
  EXPECT_DOUBLE_EQ(parsed.rope_freq_factors[8], 2.0);
  EXPECT_NEAR(rope_inv_freq(parsed)[8], std::pow(1e6, -16.0 / 128) / 2.0, 1e-15);
  expect_error([&] { ModelConfig::from_json_text(with(kQwen3, "rope_freq_factors", "[1, 2]"), "x"); },
               {"rope_freq_factors"});
  expect_error([&] {
    ModelConfig::from_json_text(with(kQwen3, "rope_freq_factors", factors + ", 0]"), "x");
  }, {"rope_freq_factors"});
  std::string with_zero = "[0";
  for (int i = 1; i < 64; ++i) with_zero += ", 1";
  expect_error([&] { ModelConfig::from_json_text(with(kQwen3, "rope_freq_factors", with_zero + "]"), "x"); },
               {"rope_freq_factors", "positive"});
  expect_error([&] {
    ModelConfig::from_json_text(
        with(with(kQwen3, "rope_freq_factors", factors + "]"), "rope_scaling",
             R"({"rope_type": "linear", "factor": 2.0})"),
        "x");
  }, {"rope_freq_factors", "together with rope scaling"});
}

// YaRN with D = 16, theta = 10000 (frequencies 10^(-i/2), i = 0..7), original context 2048,
// beta 32 / 1: the dimension bounds are 16 ln(2048 / (2 pi r)) / (2 ln 10000) = 2.016 (r = 32)
// -> floor 2 and 5.026 (r = 1) -> ceil 6, so the ramp (i - 2) / 4 is 0 for i <= 2 (keep), 1
// for i >= 6 (divide by the factor 4) and 1/4, 1/2, 3/4 between:
// f_i = 10^(-i/2) * (ramp / 4 + 1 - ramp).
TEST(RopeInvFreq, Yarn) {
  ModelConfig c;
  c.head_dim = 16;
  c.rope_theta = 10000;
  c.rope_scaling.type = "yarn";
  c.rope_scaling.factor = 4;
  c.rope_scaling.original_max_position_embeddings = 2048;
  auto f = rope_inv_freq(c);
  ASSERT_EQ(f.size(), 8u);
  const double ramp[8] = {0, 0, 0, 0.25, 0.5, 0.75, 1, 1};
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(f[size_t(i)], std::pow(10.0, -i / 2.0) * (ramp[i] / 4 + 1 - ramp[i]), 1e-15) << i;
}

// The real checkpoints in ../shared/data.
TEST(SharedDataModelConfig, RealConfigs) {
  std::string root = std::string(NANOVLLM_SHARED_DATA) + "/models/";
  if (!std::filesystem::exists(root + "stories260K-hf/config.json"))
    GTEST_SKIP() << "shared test data not found at " << root;
  auto l = ModelConfig::from_dir(root + "stories260K-hf");
  EXPECT_EQ(l.architecture, "LlamaForCausalLM");
  EXPECT_EQ(l.hidden_size, 64);
  EXPECT_EQ(l.intermediate_size, 172);
  EXPECT_EQ(l.num_hidden_layers, 5);
  EXPECT_EQ(l.num_attention_heads, 8);
  EXPECT_EQ(l.num_key_value_heads, 4);
  EXPECT_EQ(l.head_dim, 8);
  EXPECT_EQ(l.vocab_size, 512);
  EXPECT_EQ(l.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(l.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(l.rope_theta, 10000.0);
  EXPECT_TRUE(l.tie_word_embeddings);
  EXPECT_FALSE(l.attention_bias);
  EXPECT_EQ(l.torch_dtype, DType::F32);
  EXPECT_EQ(l.bos_token_id, 1);
  ASSERT_FALSE(l.eos_token_ids.empty());
  EXPECT_EQ(l.eos_token_ids[0], 2);

  if (std::filesystem::exists(root + "stories260K-hf-bf16/config.json")) {
    EXPECT_EQ(ModelConfig::from_dir(root + "stories260K-hf-bf16").torch_dtype, DType::BF16);
  }
  if (std::filesystem::exists(root + "stories260K-qwen2-hf/config.json")) {
    auto q = ModelConfig::from_dir(root + "stories260K-qwen2-hf");
    EXPECT_EQ(q.architecture, "Qwen2ForCausalLM");
    EXPECT_TRUE(q.attention_bias);
    EXPECT_EQ(q.head_dim, 8);  // hidden / heads: the config has no head_dim
    EXPECT_EQ(q.num_key_value_heads, 4);
  }
}

}  // namespace
}  // namespace nanovllm
