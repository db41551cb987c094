// JSON views of engine statistics and outputs (CLI --json, server, bench).
#pragma once
#include <nlohmann/json.hpp>

#include "nanovllm/request_output.h"
#include "nanovllm/stats.h"

namespace nanovllm {

nlohmann::json to_json(const EngineStats& s);
nlohmann::json to_json(const RequestOutput& o);

}  // namespace nanovllm
