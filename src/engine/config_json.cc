// Config <-> JSON from the field tables (engine/fields_json.h). Reading requires every key and
// refuses unknown ones, so rank 0 and a worker built from different sources fail loudly.
#include "engine/config_json.h"

#include "engine/fields_json.h"

namespace nanovllm {

std::string config_to_json(const Config& c) { return fields_json::to_json(c).dump(); }

Config config_from_json(const std::string& text) {
  try {
    Config c;
    fields_json::from_json(nlohmann::json::parse(text), "", fields_json::Missing::kError, c);
    return c;
  } catch (const std::exception& e) {
    NV_THROW("bad engine configuration from rank 0: ", e.what());
  }
}

}  // namespace nanovllm
