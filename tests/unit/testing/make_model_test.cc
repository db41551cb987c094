// make_random_model: determinism, HF layout, weight statistics, and the config it writes.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>

#include "../loader/test_util.h"  // TempDir, expect_error
#include "loader/weight_store.h"
#include "models/model_config.h"
#include "testing/make_model.h"

namespace nanovllm {
namespace {

using test::read_bytes;
using test::TempDir;

MakeModelOptions opts(const std::string& arch, DType dt, uint64_t seed, const std::string& out,
                      int threads = 0) {
  MakeModelOptions o;
  o.arch = arch;
  o.preset = "tiny";
  o.dtype = dt;
  o.seed = seed;
  o.out_dir = out;
  o.threads = threads;
  return o;
}

void mean_std(const Tensor& t, double* mean, double* std) {
  auto v = to_f32_vector(t);
  double s = 0, s2 = 0;
  for (float x : v) s += x, s2 += double(x) * x;
  *mean = s / double(v.size());
  *std = std::sqrt(s2 / double(v.size()) - *mean * *mean);
}

TEST(MakeModel, DeterministicAcrossThreadCounts) {
  TempDir d;
  make_random_model(opts("qwen3", DType::BF16, 7, d / "a", 1));
  make_random_model(opts("qwen3", DType::BF16, 7, d / "b", 2));
  make_random_model(opts("qwen3", DType::BF16, 8, d / "c", 2));
  for (const char* f : {"model.safetensors", "config.json", "generation_config.json"}) {
    std::string a = read_bytes(d / ("a/" + std::string(f)));
    ASSERT_FALSE(a.empty()) << f;
    EXPECT_TRUE(a == read_bytes(d / ("b/" + std::string(f)))) << f << " differs for equal seeds";
  }
  EXPECT_FALSE(read_bytes(d / "a/model.safetensors") == read_bytes(d / "c/model.safetensors"))
      << "different seeds gave the same weights";
  EXPECT_FALSE(std::filesystem::exists(d / "a/model.safetensors.tmp"));
}

TEST(MakeModel, Qwen3TinyLayoutConfigAndStatistics) {
  TempDir d;
  make_random_model(opts("qwen3", DType::F32, 1, d / "m"));
  auto c = ModelConfig::from_dir(d / "m");
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 192);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.torch_dtype, DType::F32);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{151645, 151643}));

  auto ws = WeightStore::open_dir(d / "m");
  EXPECT_EQ(ws.names().size(), 2u + 2u * 11u);
  EXPECT_FALSE(ws.has("lm_head.weight"));
  ws.get("model.embed_tokens.weight", {151936, 64});
  ws.get("model.norm.weight", {64});
  for (int i = 0; i < 2; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    ws.get(p + "self_attn.q_proj.weight", {64, 64});
    ws.get(p + "self_attn.k_proj.weight", {32, 64});
    ws.get(p + "self_attn.v_proj.weight", {32, 64});
    ws.get(p + "self_attn.o_proj.weight", {64, 64});
    ws.get(p + "self_attn.q_norm.weight", {16});
    ws.get(p + "self_attn.k_norm.weight", {16});
    ws.get(p + "mlp.gate_proj.weight", {192, 64});
    ws.get(p + "mlp.up_proj.weight", {192, 64});
    ws.get(p + "mlp.down_proj.weight", {64, 192});
    ws.get(p + "input_layernorm.weight", {64});
    ws.get(p + "post_attention_layernorm.weight", {64});
    EXPECT_FALSE(ws.has(p + "self_attn.q_proj.bias"));
  }
  double m, s;
  mean_std(ws.get("model.embed_tokens.weight"), &m, &s);  // 9.7M samples of N(0, 1)
  EXPECT_NEAR(m, 0.0, 0.002);
  EXPECT_NEAR(s, 1.0, 0.002);
  mean_std(ws.get("model.layers.0.mlp.down_proj.weight"), &m, &s);  // std 1/sqrt(192)
  EXPECT_NEAR(m, 0.0, 0.005);
  EXPECT_NEAR(s, 1.0 / std::sqrt(192.0), 0.004);
  mean_std(ws.get("model.layers.1.mlp.up_proj.weight"), &m, &s);  // std 1/sqrt(64)
  EXPECT_NEAR(s, 0.125, 0.004);
  // Norm weights 1 + N(0, 0.1): check all per-layer norms together (2 x 2 x 64 values).
  std::vector<float> norms;
  for (int i = 0; i < 2; ++i)
    for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight"}) {
      auto v = to_f32_vector(ws.get("model.layers." + std::to_string(i) + "." + n));
      norms.insert(norms.end(), v.begin(), v.end());
    }
  Tensor nt = Tensor::wrap(norms.data(), {int64_t(norms.size())}, DType::F32);
  mean_std(nt, &m, &s);
  EXPECT_NEAR(m, 1.0, 0.03);
  EXPECT_NEAR(s, 0.1, 0.02);
}

TEST(MakeModel, Qwen2AndLlamaVariants) {
  TempDir d;
  make_random_model(opts("qwen2", DType::BF16, 3, d / "q2"));
  auto c2 = ModelConfig::from_dir(d / "q2");
  EXPECT_EQ(c2.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(c2.attention_bias);
  EXPECT_FALSE(c2.qk_norm);
  EXPECT_EQ(c2.torch_dtype, DType::BF16);
  auto w2 = WeightStore::open_dir(d / "q2");
  EXPECT_EQ(w2.get("model.layers.1.self_attn.k_proj.bias", {32}).dtype(), DType::BF16);
  EXPECT_FALSE(w2.has("model.layers.0.self_attn.q_norm.weight"));

  make_random_model(opts("llama", DType::BF16, 3, d / "ll"));
  auto cl = ModelConfig::from_dir(d / "ll");
  EXPECT_EQ(cl.architecture, "LlamaForCausalLM");
  EXPECT_EQ(cl.vocab_size, 128256);
  EXPECT_DOUBLE_EQ(cl.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(cl.rms_norm_eps, 1e-5);
  EXPECT_EQ(cl.bos_token_id, 128000);
  ASSERT_FALSE(cl.eos_token_ids.empty());
  EXPECT_EQ(cl.eos_token_ids[0], 128001);
  auto wl = WeightStore::open_dir(d / "ll");
  wl.get("model.embed_tokens.weight", {128256, 64});
  EXPECT_FALSE(wl.has("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(wl.has("model.layers.0.self_attn.q_norm.weight"));
}

TEST(MakeModel, TokenizerFilesAndErrors) {
  TempDir d;
  std::string tok = find_npm_tokenizer_dir("qwen3");
  if (!tok.empty()) {
    auto o = opts("qwen3", DType::BF16, 0, d / "t");
    make_random_model(o);
    EXPECT_EQ(read_bytes(d / "t/tokenizer.json"), read_bytes(tok + "/tokenizer.json"));
    EXPECT_TRUE(std::filesystem::exists(d / "t/tokenizer_config.json"));
  } else {
    std::printf("npm tokenizer package not found; skipping the tokenizer copy check\n");
  }
  auto bad = opts("qwen3", DType::BF16, 0, d / "x");
  bad.tokenizer_dir = d / "no-such-dir";
  test::expect_error([&] { make_random_model(bad); }, {"tokenizer.json", "no-such-dir"});
  bad.tokenizer_dir.clear();
  bad.preset = "huge";
  test::expect_error([&] { make_random_model(bad); }, {"preset 'huge'"});
  bad.preset = "tiny";
  bad.arch = "gpt2";
  test::expect_error([&] { make_random_model(bad); }, {"arch 'gpt2'"});
  bad.arch = "qwen3";
  bad.dtype = DType::I32;
  test::expect_error([&] { make_random_model(bad); }, {"dtype"});
}

// The CLI front end (ctest sets NANOVLLM_BIN to the built `nanovllm`).
TEST(MakeModel, Cli) {
  const char* bin = std::getenv("NANOVLLM_BIN");
  if (!bin || !std::filesystem::exists(bin))
    GTEST_SKIP() << "NANOVLLM_BIN not set or missing (run through ctest)";
  TempDir d;
  auto run = [&](const std::string& args) {
    std::string cmd = std::string(bin) + " make-model " + args + " >/dev/null 2>&1";
    int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  ASSERT_EQ(run("--arch qwen2 --preset tiny --dtype bf16 --seed 11 --out " + (d / "a")), 0);
  ASSERT_EQ(run("--arch qwen2 --preset tiny --dtype bf16 --seed 11 --threads 1 --out " + (d / "b")), 0);
  EXPECT_TRUE(read_bytes(d / "a/model.safetensors") == read_bytes(d / "b/model.safetensors"));
  // Same bytes as the library call with the same options.
  make_random_model(opts("qwen2", DType::BF16, 11, d / "c"));
  EXPECT_TRUE(read_bytes(d / "a/model.safetensors") == read_bytes(d / "c/model.safetensors"));
  EXPECT_EQ(ModelConfig::from_dir(d / "a").architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(run("--arch gpt2 --out " + (d / "x")), 2);  // bad usage
  EXPECT_EQ(run("--preset tiny"), 2);                   // --out is required
  EXPECT_EQ(run("--out " + (d / "y") + " --tokenizer-dir " + (d / "none")), 1);  // error
}

}  // namespace
}  // namespace nanovllm
