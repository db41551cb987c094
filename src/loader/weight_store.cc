// WeightStore: the union of the safetensors files of a model directory, indexed by tensor name.
// Source of truth, in order: model.safetensors.index.json (sharded HF checkpoints), else
// model.safetensors, else every *.safetensors file in the directory (sorted).
#include "loader/weight_store.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "loader/quant_config.h"
#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm {

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) NV_THROW("cannot read '", p.string(), "'");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace

WeightStore WeightStore::open_dir(const std::string& model_dir) {
  WeightStore s;
  s.dir_ = model_dir;
  fs::path dir(model_dir);
  std::error_code ec;
  if (is_gguf_model(model_dir)) {
    s.gguf_ = GgufCheckpoint::open(model_dir);
    return s;
  }
  if (!fs::is_directory(dir, ec)) NV_THROW("model directory '", model_dir, "' does not exist");

  fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index, ec)) {
    const nlohmann::json j = parse_json(read_text(index), index.string());
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      NV_THROW("'", index.string(), "' has no \"weight_map\" object");
    std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        NV_THROW("'", index.string(), "': weight_map entry for '", it.key(), "' is not a string");
      std::string shard = it.value().get<std::string>();
      auto sh = shards.find(shard);
      if (sh == shards.end()) {
        fs::path sp = dir / shard;
        if (!fs::exists(sp, ec))
          NV_THROW("shard '", shard, "' listed in '", index.string(), "' (for tensor '", it.key(),
                   "') is missing");
        sh = shards.emplace(shard, SafetensorsFile::open(sp.string())).first;
      }
      // An index that names a tensor its shard lacks is a broken checkpoint: say so now.
      if (!sh->second->has(it.key()))
        NV_THROW("tensor '", it.key(), "' is listed in '", index.string(), "' for shard '",
                 shard, "' but that file does not contain it");
      s.by_name_[it.key()] = sh->second;
    }
    s.attach_int4();
    return s;
  }

  std::vector<fs::path> files;
  fs::path single = dir / "model.safetensors";
  if (fs::exists(single, ec)) {
    files.push_back(single);
  } else {
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".safetensors") files.push_back(e.path());
    std::sort(files.begin(), files.end());
  }
  if (files.empty())
    NV_THROW("no model.safetensors, model.safetensors.index.json or *.safetensors in '",
             model_dir, "'");
  for (const auto& p : files) {
    auto f = SafetensorsFile::open(p.string());
    for (const auto& [name, info] : f->tensors()) {
      auto prev = s.by_name_.find(name);
      if (prev != s.by_name_.end())
        NV_THROW("tensor '", name, "' appears in both '", prev->second->path(), "' and '",
                 p.string(), "'");
      s.by_name_[name] = f;
    }
  }
  s.attach_int4();
  return s;
}

void WeightStore::attach_int4() {
  if (auto qc = read_quant_config(dir_)) int4_ = std::make_shared<Int4Checkpoint>(*qc, by_name_);
}

bool WeightStore::has(const std::string& name) const {
  if (int4_ && int4_->has(name)) return true;
  return gguf_ ? gguf_->tensors().count(name) > 0 : by_name_.count(name) > 0;
}

Tensor WeightStore::get(const std::string& name) const {
  if (gguf_) return gguf_->get(name);
  if (int4_ && int4_->has(name)) return int4_->dequantize(name);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) NV_THROW("missing tensor '", name, "' in ", dir_);
  return it->second->get(name);
}

Tensor WeightStore::get(const std::string& name, const Shape& expected) const {
  Tensor t = get(name);
  if (t.shape() != expected)
    NV_THROW("tensor '", name, "' has shape ", shape_str(t.shape()), ", expected ",
             shape_str(expected), " (in ", dir_, ")");
  return t;
}

Tensor WeightStore::take(const std::string& name, const Shape& expected) const {
  Tensor t = get(name, expected);
  taken_.insert(name);
  return t;
}

bool WeightStore::has_int4(const std::string& name) const {
  return (int4_ && int4_->has(name)) || (gguf_ && gguf_->has_int4(name));
}

int WeightStore::int4_bits(const std::string& name) const {
  if (int4_ && int4_->has(name)) return 4;
  return gguf_ ? gguf_->int4_bits(name) : 0;
}

bool WeightStore::int4_table(const std::string& name) const {
  return !(int4_ && int4_->has(name)) && gguf_ && gguf_->int4_table(name);
}

Int4Groups WeightStore::take_int4(const std::string& name, const Shape& expected) const {
  if (gguf_ && gguf_->has_int4(name)) {
    Int4Groups g = gguf_->get_int4(name);
    if (Shape{g.N, g.K} != expected)
      NV_THROW("tensor '", name, "' has shape ", shape_str(Shape{g.N, g.K}), ", expected ", shape_str(expected),
               " (in ", dir_, ")");
    taken_.insert(name);
    return g;
  }
  NV_CHECK(int4_ && int4_->has(name), "tensor '", name, "' is not a GPTQ / AWQ module (in ", dir_, ")");
  const Shape s = int4_->shape(name);
  if (s != expected)
    NV_THROW("tensor '", name, "' (", int4_->config().method, " module) has shape ", shape_str(s),
             ", expected ", shape_str(expected), " (in ", dir_, ")");
  taken_.insert(name);
  return int4_->unpack(name);
}

std::vector<std::string> WeightStore::unused() const {
  std::vector<std::string> v;
  if (gguf_) {
    for (const auto& [n, r] : gguf_->tensors())
      if (!taken_.count(n)) v.push_back(n);
    return v;
  }
  for (const std::string& n : names())
    if (!taken_.count(n)) v.push_back(n);
  return v;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> v;
  if (gguf_) {
    for (const auto& [n, r] : gguf_->tensors()) v.push_back(n);
    return v;
  }
  // A quantized module's fields appear as its one X.weight.
  for (const auto& [n, f] : by_name_)
    if (!int4_ || !int4_->is_field(n)) v.push_back(n);
  if (int4_) {
    for (const std::string& n : int4_->weight_names()) v.push_back(n);
    std::sort(v.begin(), v.end());
  }
  return v;
}

}  // namespace nanovllm
