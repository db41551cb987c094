// Fuzz target (make fuzz: fuzz_tokenizer with libFuzzer; make asan: fuzz_smoke_tokenizer):
// arbitrary bytes are encoded with the tokenizer in $TOKENIZER_FUZZ_DIR (default: the stories260K
// one in shared data); the ids must stream-decode to exactly decode(ids), and nothing may crash.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "tokenizer/incremental.h"
#include "tokenizer/tokenizer.h"

namespace {

std::unique_ptr<nanovllm::Tokenizer> load() {
  const char* dir = std::getenv("TOKENIZER_FUZZ_DIR");
  std::string d = dir ? dir : "../shared/data/models/stories260K-hf";
  if (std::ifstream(d + "/tokenizer.json").good()) return nanovllm::Tokenizer::from_dir(d);
  return nullptr;  // no tokenizer: every input is a no-op
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
