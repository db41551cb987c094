// GPTQ / AWQ checkpoints (loader/int4_checkpoint.h, quant_config.h, int4_packing.h,
// int4_slice.h): hand-worked nibble layouts, pack/unpack round trips, the dequantization through
// WeightStore, tensor-parallel slices, and every bad input as an error naming file, tensor and field.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "loader/int4_packing.h"
#include "loader/int4_slice.h"
#include "loader/quant_config.h"
#include "loader/safetensors_writer.h"
#include "loader/tp_slice.h"
#include "loader/weight_store.h"
#include "test_util.h"

namespace nanovllm {
namespace {

using test::expect_error;
using test::TempDir;

TEST(Int4Packing, HandWorkedWords) {
  // One int32 0x76543210: nibble i holds i.
  const int32_t word = 0x76543210;
  // GPTQ qweight [1, 1] (K = 8, N = 1): input row j gets nibble j.
  uint8_t q[8];
  gptq_unpack_qweight(&word, 8, 1, q);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(q[j], j);
  // AWQ qweight [1, 1] (K = 1, N = 8): column {0,2,4,6,1,3,5,7}[i] gets nibble i.
  awq_unpack_qweight(&word, 1, 8, q);
  const int want[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int n = 0; n < 8; ++n) EXPECT_EQ(q[n], want[n]) << n;
  // qzeros: GPTQ v1 adds one (a stored 15 reads as 16), AWQ interleaves.
  const int32_t zw = int32_t(0xF6543210u);
  uint8_t z[8];
  unpack_qzeros(&zw, 1, 8, false, 1, z);
  for (int n = 0; n < 7; ++n) EXPECT_EQ(z[n], n + 1);
  EXPECT_EQ(z[7], 16);
  unpack_qzeros(&word, 1, 8, true, 0, z);
  for (int n = 0; n < 8; ++n) EXPECT_EQ(z[n], want[n]);
}

TEST(Int4Packing, RoundTrips) {
  std::mt19937 rng(1);
  const int64_t N = 16, K = 64, G = 4;
  std::vector<uint8_t> q(N * K), z(N * G), back(N * K), zb(N * G);
  for (auto& v : q) v = uint8_t(rng() % 16);
  for (auto& v : z) v = uint8_t(1 + rng() % 15);
  std::vector<int32_t> packed(N * K / 8), pz(G * N / 8);
  for (bool awq : {false, true}) {
    if (awq) awq_pack_qweight(q.data(), N, K, packed.data()), awq_unpack_qweight(packed.data(), K, N, back.data());
    else gptq_pack_qweight(q.data(), N, K, packed.data()), gptq_unpack_qweight(packed.data(), K, N, back.data());
    EXPECT_EQ(back, q) << awq;
    pack_qzeros(z.data(), N, G, awq, awq ? 0 : 1, pz.data());
    unpack_qzeros(pz.data(), G, N, awq, awq ? 0 : 1, zb.data());
    EXPECT_EQ(zb, z) << awq;
  }
}

// A one-module checkpoint "m.weight" [N, K] in `dir`: random codes, zeros, f16 scales.
struct Module {
  int64_t N = 16, K = 64, group = 32;
  std::vector<uint8_t> q, z;  // [N, K], [N, G]
  std::vector<float> s;       // [G, N]
  std::vector<int32_t> g_idx;
  int64_t G() const { return K / group; }
};

Module random_module(bool desc_act, uint32_t seed) {
  Module m;
  std::mt19937 rng(seed);
  m.q.resize(size_t(m.N * m.K));
  m.z.resize(size_t(m.N * m.G()));
  m.s.resize(size_t(m.G() * m.N));
  for (auto& v : m.q) v = uint8_t(rng() % 16);
  for (auto& v : m.z) v = uint8_t(1 + rng() % 15);
  for (auto& v : m.s) v = f16_to_f32(f32_to_f16(0.001f * float(1 + rng() % 100)));
  for (int64_t k = 0; k < m.K; ++k) m.g_idx.push_back(int32_t(k / m.group));
  if (desc_act) std::shuffle(m.g_idx.begin(), m.g_idx.end(), rng);
  return m;
}

std::map<std::string, Tensor> module_tensors(const Module& m, bool awq, bool v1) {
  std::map<std::string, Tensor> t;
  Tensor qw = awq ? Tensor::empty({m.K, m.N / 8}, DType::I32) : Tensor::empty({m.K / 8, m.N}, DType::I32);
  if (awq) awq_pack_qweight(m.q.data(), m.N, m.K, qw.data<int32_t>());
  else gptq_pack_qweight(m.q.data(), m.N, m.K, qw.data<int32_t>());
  Tensor qz = Tensor::empty({m.G(), m.N / 8}, DType::I32);
  pack_qzeros(m.z.data(), m.N, m.G(), awq, v1 ? 1 : 0, qz.data<int32_t>());
  Tensor sc = Tensor::empty({m.G(), m.N}, DType::F16);
  convert_f32_to(m.s.data(), sc.raw(), DType::F16, m.G() * m.N);
  t["m.qweight"] = qw;
  t["m.qzeros"] = qz;
  t["m.scales"] = sc;
  if (!awq) {
    Tensor g = Tensor::empty({m.K}, DType::I32);
    std::copy(m.g_idx.begin(), m.g_idx.end(), g.data<int32_t>());
    t["m.g_idx"] = g;
  }
  return t;
}

void write_config(const TempDir& d, const std::string& qcfg) {
  test::write_bytes(d / "config.json", R"({"architectures": ["Qwen3ForCausalLM"], "quantization_config": )" + qcfg + "}");
}

const char* kGptq = R"({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": true, "sym": false})";

TEST(Int4Checkpoint, DequantizesThroughWeightStore) {
  for (int variant = 0; variant < 3; ++variant) {  // gptq v1, gptq_v2, awq
    const bool awq = variant == 2, v1 = variant == 0;
    TempDir d;
    const Module m = random_module(!awq, 7 + variant);
    write_safetensors(d / "model.safetensors", module_tensors(m, awq, v1));
    write_config(d, awq ? R"({"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemm"})"
                        : v1 ? kGptq
                             : R"({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": true,
                                  "checkpoint_format": "gptq_v2"})");
    const WeightStore ws = WeightStore::open_dir(d.path.string());
    ASSERT_TRUE(ws.int4());
    EXPECT_EQ(ws.names(), std::vector<std::string>{"m.weight"});
    const Tensor w = ws.take("m.weight", {m.N, m.K});
    ASSERT_EQ(w.dtype(), DType::F32);
    for (int64_t n = 0; n < m.N; ++n)
      for (int64_t k = 0; k < m.K; ++k) {
        const int64_t g = m.g_idx[size_t(k)];
        const float want = m.s[size_t(g * m.N + n)] *
                           float(int(m.q[size_t(n * m.K + k)]) - int(m.z[size_t(n * m.G() + g)]));
        ASSERT_EQ(w.data<float>()[n * m.K + k], want) << variant << " " << n << " " << k;
      }
    EXPECT_TRUE(ws.unused().empty());
  }
}

TEST(Int4Checkpoint, TensorParallelSlices) {
  TempDir d;
  const Module m = random_module(true, 3);
  write_safetensors(d / "model.safetensors", module_tensors(m, false, true));
  write_config(d, kGptq);
  const WeightStore ws = WeightStore::open_dir(d.path.string());
  const Int4Groups full = ws.int4()->unpack("m.weight");
  const Tensor dense = dequantize_int4(full);
  // Row-parallel rank 1 of 2: input features [32, 64), groups cut by the act-order shuffle.
  const auto cols = load_row_parallel_int4(ws, "m.weight", {m.N, m.K}, {1, 2});
  ASSERT_TRUE(cols);
  const Tensor dc = dequantize_int4(*cols);
  for (int64_t n = 0; n < m.N; ++n)
    for (int64_t k = 0; k < 32; ++k) ASSERT_EQ(dc.data<float>()[n * 32 + k], dense.data<float>()[n * m.K + 32 + k]);
  // Column-parallel rows [8, 16) of the module stacked twice (as q and k would be).
  const Int4Groups rows = int4_rows(full, 8, 8);
  const Int4Groups both = int4_concat_rows({rows, full}, {"a", "b"});
  EXPECT_EQ(both.N, 24);
  const Tensor db = dequantize_int4(both);
  for (int64_t k = 0; k < m.K; ++k) ASSERT_EQ(db.data<float>()[k], dense.data<float>()[8 * m.K + k]);
  // Projections of one input must share g_idx (one gather on the int4 kernels).
  Int4Groups other = full;
  other.g_idx = Tensor::empty({m.K}, DType::I32);
  for (int64_t k = 0; k < m.K; ++k) other.g_idx.data<int32_t>()[k] = int32_t(k / 32);
  expect_error([&] { int4_concat_rows({full, other}, {"x.q_proj.weight", "x.k_proj.weight"}); },
               {"'x.k_proj.weight' and 'x.q_proj.weight' have different g_idx"});
}

TEST(Int4Checkpoint, BadInputsNameFileTensorAndField) {
  const Module m = random_module(true, 5);
  const std::string file = "model.safetensors";
  // Each case: drop or replace tensors, a config, and the pieces the error must name.
  struct Case {
    std::string what, config;
    std::function<void(std::map<std::string, Tensor>&)> edit;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"missing qzeros", kGptq, [](auto& t) { t.erase("m.qzeros"); }, {file, "'m.qzeros'", "qzeros field"}},
      {"missing scales", kGptq, [](auto& t) { t.erase("m.scales"); }, {file, "'m.scales'", "scales field"}},
      {"missing g_idx (desc_act)", kGptq, [](auto& t) { t.erase("m.g_idx"); }, {file, "'m.g_idx'", "g_idx field"}},
      {"qzeros without qweight", kGptq, [](auto& t) { t.erase("m.qweight"); }, {file, "'m.qweight'", "qweight field"}},
      {"scales shape", kGptq, [](auto& t) { t["m.scales"] = Tensor::zeros({2, 8}, DType::F16); },
       {file, "'m.scales'", "(field scales)", "[2, 8]", "expected [2, 16]"}},
      {"qzeros shape", kGptq, [](auto& t) { t["m.qzeros"] = Tensor::zeros({2, 1}, DType::I32); },
       {file, "'m.qzeros'", "(field qzeros)", "expected [2, 2]"}},
      {"qweight dtype", kGptq, [](auto& t) { t["m.qweight"] = Tensor::zeros({8, 16}, DType::F16); },
       {file, "'m.qweight'", "(field qweight)", "I32"}},
      {"scales dtype", kGptq, [](auto& t) { t["m.scales"] = Tensor::zeros({2, 16}, DType::I32); },
       {file, "'m.scales'", "(field scales)", "F16"}},
      {"g_idx shape", kGptq, [](auto& t) { t["m.g_idx"] = Tensor::zeros({63}, DType::I32); },
       {file, "'m.g_idx'", "(field g_idx)", "expected [64]"}},
      {"group does not divide K", R"({"quant_method": "gptq", "bits": 4, "group_size": 48})", nullptr,
       {"config.json", "quantization_config.group_size 48", "'m.qweight'", file}},
      {"awq with g_idx", R"({"quant_method": "awq", "bits": 4, "group_size": 32})", nullptr,
       {file, "'m.g_idx'", "(field g_idx)", "AWQ"}},
      {"dense and quantized", kGptq, [](auto& t) { t["m.weight"] = Tensor::zeros({16, 64}, DType::F16); },
       {file, "'m.weight'", "quantized fields"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir d;
    auto t = module_tensors(m, false, true);
    if (c.edit) c.edit(t);
    write_safetensors(d / file, t);
    write_config(d, c.config);
    expect_error([&] { WeightStore::open_dir(d.path.string()); }, c.parts);
  }
  // g_idx values are read when the module is unpacked.
  TempDir d;
  auto t = module_tensors(m, false, true);
  t["m.g_idx"].data<int32_t>()[17] = 2;
  write_safetensors(d / file, t);
  write_config(d, kGptq);
  const WeightStore ws = WeightStore::open_dir(d.path.string());
  expect_error([&] { ws.get("m.weight"); }, {file, "'m.g_idx'", "(field g_idx)", "group 2", "input feature 17"});
  expect_error([&] { ws.take_int4("m.weight", {16, 32}); }, {"'m.weight'", "[16, 64]", "expected [16, 32]"});
}

TEST(Int4Checkpoint, QuantizationConfigRefusals) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {R"({"quant_method": "fp8"})", {"quantization_config.quant_method 'fp8' is not supported"}},
      {R"({"quant_method": "compressed-tensors"})", {"quant_method 'compressed-tensors'"}},
      {R"({"quant_method": "bitsandbytes", "load_in_4bit": true})", {"quant_method 'bitsandbytes'"}},
      {R"({"bits": 4})", {"quantization_config has no quant_method"}},
      {R"({"quant_method": "gptq", "bits": 8, "group_size": 128})", {"quantization_config.bits 8"}},
      {R"({"quant_method": "awq", "w_bit": 3})", {"quantization_config.bits 3"}},
      {R"({"quant_method": "gptq", "bits": 4, "checkpoint_format": "marlin"})", {"checkpoint_format 'marlin'"}},
      {R"({"quant_method": "gptq", "bits": 4, "is_marlin_format": true})", {"is_marlin_format"}},
      {R"({"quant_method": "gptq", "bits": 4, "dynamic": {"+:.*down.*": {"bits": 8}}})", {"dynamic rule '+:.*down.*'"}},
      {R"({"quant_method": "awq", "bits": 4, "version": "gemv"})", {"quantization_config.version 'gemv'"}},
      {R"({"quant_method": "awq", "bits": 4, "zero_point": false})", {"quantization_config.zero_point false"}},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 0})", {"quantization_config.group_size 0"}},
      {R"({"quant_method": "gptq", "bits": "4"})", {"quantization_config.bits must be an integer"}},
  };
  for (const auto& [q, parts] : cases) {
    SCOPED_TRACE(q);
    auto cfg = nlohmann::json::parse(std::string(R"({"quantization_config": )") + q + "}");
    std::vector<std::string> p = parts;
    p.push_back("cfg.json");
    expect_error([&] { parse_quant_config(cfg, "cfg.json"); }, p);
  }
  auto ok = parse_quant_config(nlohmann::json::parse(
                                   R"({"quantization_config": {"quant_method": "GPTQ", "bits": 4, "group_size": -1,
                                       "sym": false, "dynamic": {"-:.*lm_head": {}}}})"),
                               "c");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->str(), "gptq (v1 zeros, one group per row, asym)");
  EXPECT_EQ(ok->modules_to_not_convert, std::vector<std::string>{".*lm_head"});
  EXPECT_FALSE(parse_quant_config(nlohmann::json::parse(R"({"quantization_config": null})"), "c"));
}

}  // namespace
}  // namespace nanovllm
