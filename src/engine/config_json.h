// Config <-> JSON: how rank 0 hands its (validated, clipped) configuration to the other
// tensor-parallel ranks, which then build the same model runner.
#pragma once
#include <string>

#include "nanovllm/config.h"

namespace nanovllm {

std::string config_to_json(const Config& c);
Config config_from_json(const std::string& text);  // throws nanovllm::Error on bad input

}  // namespace nanovllm
