// SamplingParams <-> JSON (the field table's names, which are also the server's request fields),
// as a trace records each request's parameters for `nanovllm replay` (--trace-requests).
#pragma once
#include <nlohmann/json.hpp>

#include "nanovllm/sampling_params.h"

namespace nanovllm {

nlohmann::json params_to_json(const SamplingParams& p);
// Absent keys keep their defaults (a trace from an older writer); an unknown key or a value of
// the wrong type throws nanovllm::Error naming it. The result is validate()d.
SamplingParams params_from_json(const nlohmann::json& j);

}  // namespace nanovllm
