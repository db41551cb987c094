#include "engine/params_json.h"

#include <stdexcept>

#include "engine/fields_json.h"

namespace nanovllm {

nlohmann::json params_to_json(const SamplingParams& p) { return fields_json::to_json(p); }

SamplingParams params_from_json(const nlohmann::json& j) {
  SamplingParams p;
  try {
    fields_json::from_json(j, "", fields_json::Missing::kDefault, p);
  } catch (const nlohmann::json::exception& e) {  // a value of another type
    NV_THROW("sampling parameters: ", e.what());
  } catch (const std::logic_error& e) {  // a logit_bias key that is no integer
    NV_THROW("sampling parameters: ", e.what());
  }
  p.validate();
  return p;
}

}  // namespace nanovllm
