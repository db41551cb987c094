// Engine and sampling flags shared by generate, bench, serve and logits: one flag per row of the
// field tables (nanovllm/field.h) that names one, so a new Config or SamplingParams field with a
// flag needs no edit here.
#pragma once
#include <CLI/CLI.hpp>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "nanovllm/config.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm::cli {

// Every Config flag (--model is added by the caller: some commands make a model first), and
// c.worker_command = this binary's `worker` command. A value that breaks its field's rule is an
// error naming the flag ("--max-num-seqs must be >= 1, got 0").
void add_engine_flags(CLI::App& app, Config& c);
// The flags of the Config fields named (by field name), e.g. `nanovllm logits`'.
void add_config_flags(CLI::App& app, Config& c, std::initializer_list<std::string_view> fields);
// Every SamplingParams flag. After parsing, p.validate() checks what involves two fields.
void add_sampling_flags(CLI::App& app, SamplingParams& p);

std::vector<int> parse_ids(const std::string& s);  // "1,2, 3" -> {1,2,3}; clear error otherwise
std::string read_file(const std::string& path);

}  // namespace nanovllm::cli
