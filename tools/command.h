// Subcommand registry for the `nanovllm` CLI. Each tools/cmd_*.cc registers itself:
//   NANOVLLM_COMMAND(tokenize, "Tokenize text with a tokenizer.json", run_tokenize);
// where run_tokenize(int argc, char** argv) gets argv[0] = "nanovllm <name>".
#pragma once
#include <functional>
#include <map>
#include <string>

namespace nanovllm::cli {

using CommandFn = int (*)(int argc, char** argv);
struct CommandInfo {
  std::string help;
  CommandFn fn;
};
std::map<std::string, CommandInfo>& registry();
struct Registrar {
  Registrar(const char* name, const char* help, CommandFn fn) { registry()[name] = {help, fn}; }
};

}  // namespace nanovllm::cli

#define NANOVLLM_COMMAND(name, help, fn) \
  static ::nanovllm::cli::Registrar nanovllm_cmd_##fn(name, help, fn)
