// `nanovllm <command> [options]`: dispatches to the registered subcommands. Every error that
// reaches here is printed as one clear line and exits non-zero.
#include <cstdio>
#include <cstdlib>
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
  std::fprintf(stderr, "\n`nanovllm <command> --help` for a command's options; --verbose (anywhere): errors also\n"
                       "say where in the source they were raised.\n");
}

// `--verbose` anywhere (or NANOVLLM_VERBOSE=1): errors also say where they were raised (file:line
// in the source tree and the failed check), for bug reports; users see only the message.
static bool take_verbose(int& argc, char** argv) {
  bool verbose = false;
  if (const char* e = std::getenv("NANOVLLM_VERBOSE"); e && *e && std::strcmp(e, "0") != 0) verbose = true;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--verbose")) {
      verbose = true;
      continue;
    }
    argv[out++] = argv[i];
  }
  argc = out;
  argv[argc] = nullptr;
  return verbose;
}

int main(int argc, char** argv) {
  const bool verbose = take_verbose(argc, argv);
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
    if (verbose && !e.where().empty()) std::fprintf(stderr, "  (raised by %s)\n", e.where().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nanovllm %s: error: %s\n", it->first.c_str(), e.what());
    return 1;
  }
}
