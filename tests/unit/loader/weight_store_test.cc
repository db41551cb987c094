// WeightStore over single, sharded (index.json) and multi-file directories, plus its errors.
#include <gtest/gtest.h>

#include <cstring>

#include "loader/safetensors_writer.h"
#include "loader/weight_store.h"
#include "test_util.h"

namespace nanovllm {
namespace {

using test::expect_error;
using test::TempDir;

Tensor filled(const Shape& s, float v) {
  Tensor t = Tensor::empty(s, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = v + float(i);
  return t;
}

TEST(WeightStore, SingleFile) {
  TempDir d;
  write_safetensors(d / "model.safetensors", {{"a", filled({2, 3}, 1)}, {"b", filled({4}, 10)}});
  auto ws = WeightStore::open_dir(d.path.string());
  EXPECT_EQ(ws.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(ws.has("a"));
  EXPECT_FALSE(ws.has("c"));
  Tensor a = ws.get("a", {2, 3});
  EXPECT_EQ(a.data<float>()[5], 6.f);
  expect_error([&] { ws.get("c"); }, {"missing tensor 'c'", d.path.string()});
  expect_error([&] { ws.get("a", {3, 2}); },
               {"tensor 'a' has shape [2, 3], expected [3, 2]"});
}

TEST(WeightStore, ShardedIndex) {
  TempDir d;
  write_safetensors(d / "model-00001-of-00002.safetensors",
                    {{"x", filled({2}, 0)}, {"y", filled({3}, 5)}});
  write_safetensors(d / "model-00002-of-00002.safetensors", {{"z", filled({1, 2}, 7)}});
  test::write_bytes(d / "model.safetensors.index.json", R"({
    "metadata": {"total_size": 28},
    "weight_map": {"x": "model-00001-of-00002.safetensors",
                   "y": "model-00001-of-00002.safetensors",
                   "z": "model-00002-of-00002.safetensors"}})");
  auto ws = WeightStore::open_dir(d.path.string());
  EXPECT_EQ(ws.names(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(ws.get("y").data<float>()[2], 7.f);
  EXPECT_EQ(ws.get("z", {1, 2}).data<float>()[1], 8.f);
}

TEST(WeightStore, ShardedIndexErrors) {
  TempDir d;
  write_safetensors(d / "s1.safetensors", {{"x", filled({2}, 0)}});
  test::write_bytes(d / "model.safetensors.index.json",
                    R"({"weight_map": {"x": "s1.safetensors", "y": "s2.safetensors"}})");
  expect_error([&] { WeightStore::open_dir(d.path.string()); },
               {"shard 's2.safetensors'", "missing"});

  test::write_bytes(d / "model.safetensors.index.json",
                    R"({"weight_map": {"x": "s1.safetensors", "q": "s1.safetensors"}})");
  expect_error([&] { WeightStore::open_dir(d.path.string()); }, {"'q'", "s1.safetensors"});

  test::write_bytes(d / "model.safetensors.index.json", R"({"weight_map": )");
  expect_error([&] { WeightStore::open_dir(d.path.string()); },
               {"malformed JSON", "model.safetensors.index.json"});

  test::write_bytes(d / "model.safetensors.index.json", R"({"metadata": {}})");
  expect_error([&] { WeightStore::open_dir(d.path.string()); }, {"weight_map"});
}

TEST(WeightStore, GlobsFilesWithoutIndex) {
  TempDir d;
  write_safetensors(d / "part-a.safetensors", {{"p", filled({1}, 1)}});
  write_safetensors(d / "part-b.safetensors", {{"q", filled({1}, 2)}});
  auto ws = WeightStore::open_dir(d.path.string());
  EXPECT_EQ(ws.get("q").data<float>()[0], 2.f);
  // The same name in two files is ambiguous.
  write_safetensors(d / "part-c.safetensors", {{"p", filled({1}, 3)}});
  expect_error([&] { WeightStore::open_dir(d.path.string()); }, {"'p'", "part-c.safetensors"});
}

TEST(WeightStore, MissingOrEmptyDirectory) {
  TempDir d;
  expect_error([&] { WeightStore::open_dir(d / "nothing"); }, {"does not exist", "nothing"});
  expect_error([&] { WeightStore::open_dir(d.path.string()); }, {"no model.safetensors"});
}

TEST(SharedDataWeightStore, Stories260K) {
  std::string dir = std::string(NANOVLLM_SHARED_DATA) + "/models/stories260K-hf";
  if (!std::filesystem::exists(dir + "/model.safetensors"))
    GTEST_SKIP() << "shared test data not found at " << dir;
  auto ws = WeightStore::open_dir(dir);
  // 5 layers x 9 tensors + embed + final norm, tied (no lm_head).
  EXPECT_EQ(ws.names().size(), 47u);
  Tensor e = ws.get("model.embed_tokens.weight", {512, 64});
  EXPECT_EQ(e.dtype(), DType::F32);
  ws.get("model.layers.4.self_attn.k_proj.weight", {32, 64});
  ws.get("model.layers.0.mlp.gate_proj.weight", {172, 64});
  EXPECT_FALSE(ws.has("lm_head.weight"));
}

}  // namespace
}  // namespace nanovllm
