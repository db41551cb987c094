// `nanovllm <command> [options]`: dispatches to the registered subcommands. Every error that
// reaches here is printed as one clear line and exits non-zero.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "command.h"
#include "util/check.h"

namespace nanovllm::cli {
std::map<std::string, CommandInfo>& registry() {
  static std::map<std::string, CommandInfo> r;
  return r;
}
}  // namespace nanovllm::cli

static void usage() {
  std::fprintf(stderr, "usage: nanovllm <command> [options]\n\ncommands:\n");
  for (auto& [name, info] : nanovllm::cli::registry())
    std::fprintf(stderr, "  %-14s %s\n", name.c_str(), info.help.c_str());
  std::fprintf(stderr, "\n`nanovllm <command> --help` for a command's options.\n");
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  auto& reg = nanovllm::cli::registry();
  auto it = reg.find(argv[1]);
  if (it == reg.end()) {
    std::fprintf(stderr, "nanovllm: unknown command '%s'\n", argv[1]);
    usage();
    return 2;
  }
  std::string prog = std::string("nanovllm ") + argv[1];
  argv[1] = prog.data();
  try {
    return it->second.fn(argc - 1, argv + 1);
  } catch (const nanovllm::Error& e) {
    std::fprintf(stderr, "nanovllm %s: error: %s\n", it->first.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nanovllm %s: error: %s\n", it->first.c_str(), e.what());
    return 1;
  }
}
