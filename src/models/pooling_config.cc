#include "models/pooling_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  NV_CHECK(f.good(), "cannot read ", p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_json(ss.str(), p.string());
}

}  // namespace

std::optional<PoolingConfig> PoolingConfig::from_dir(const std::string& model_dir) {
  const fs::path modules = fs::path(model_dir) / "modules.json";
  std::error_code ec;
  if (!fs::exists(modules, ec)) return std::nullopt;
  const nlohmann::json m = read_json(modules);
  NV_CHECK(m.is_array(), modules.string(), ": expected a list of modules");
  std::optional<PoolingConfig> out;
  bool normalize = false;
  for (const auto& mod : m) {
    NV_CHECK(mod.is_object() && mod.contains("type") && mod["type"].is_string(), modules.string(),
             ": each module needs a string \"type\"");
    const std::string type = mod["type"];
    if (type.find("Normalize") != std::string::npos) normalize = true;
    if (type.find("models.Pooling") == std::string::npos) continue;
    const std::string sub = mod.value("path", "");
    NV_CHECK(sub.find("..") == std::string::npos, modules.string(), ": module path '", sub, "' leaves the model folder");
    const nlohmann::json pc = read_json(fs::path(model_dir) / sub / "config.json");
    NV_CHECK(pc.is_object(), sub, "/config.json: expected an object");
    PoolingConfig p;
    if (pc.value("pooling_mode_lasttoken", false)) p.mode = Mode::kLast;
    else if (pc.value("pooling_mode_mean_tokens", false)) p.mode = Mode::kMean;
    else if (pc.value("pooling_mode_cls_token", false)) p.mode = Mode::kCls;
    else
      NV_THROW(sub, "/config.json: pooling mode not supported (lasttoken, mean_tokens and cls_token are; got ",
               pc.dump(), ")");
    out = p;
  }
  if (out) out->normalize = normalize;
  return out;
}

const char* PoolingConfig::mode_name() const {
  switch (mode) {
    case Mode::kLast: return "last";
    case Mode::kMean: return "mean";
    case Mode::kCls: return "cls";
  }
  return "?";
}

}  // namespace nanovllm
