// Fuzz target (make fuzz: fuzz_gguf_vocab with libFuzzer; make asan: fuzz_smoke_gguf_vocab): a
// GGUF vocabulary made from the input bytes (model, pre, tokens, types, scores, merges, special
// ids, flags; often inconsistent on purpose) goes through Tokenizer::from_gguf_vocab. It must
// either throw nanovllm::Error or give a tokenizer that encodes the rest of the input and
// stream-decodes it to exactly decode(ids); anything else (another exception, a crash) is a bug.
// 500k runs found nothing when it was written.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tokenizer/gguf_vocab.h"
#include "tokenizer/incremental.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace {

struct Bytes {
  const uint8_t* p;
  size_t n;
  uint8_t byte() {
    if (!n) return 0;
    --n;
    return *p++;
  }
  std::string str(size_t max_len) {
    size_t len = std::min<size_t>(byte() % (max_len + 1), n);
    std::string s(reinterpret_cast<const char*>(p), len);
    p += len;
    n -= len;
    return s;
  }
};

const char* kModels[] = {"gpt2", "llama", "llama", "gpt2", "bert"};
const char* kPres[] = {"",       "default", "llama-bpe", "qwen2",          "qwen35",
                       "gpt-2",  "mpt",     "starcoder", "deepseek-coder", "falcon",
                       "tekken", "gpt-4o",  "nope"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in{data, size};
  nanovllm::GgufVocab v;
  v.model = kModels[in.byte() % std::size(kModels)];
  v.pre = kPres[in.byte() % std::size(kPres)];
  int n = in.byte() % 48 + 1;
  uint8_t flags = in.byte();
  for (int i = 0; i < n; ++i) {
    // Mostly short pieces of a small alphabet, so that merges and cuts exist.
    uint8_t k = in.byte();
    if (k < 200)
      v.tokens.push_back(std::string(1, "ab c\xC4\xA0<>|"[k % 9]) +
                         (k % 3 ? std::string(1, "abc"[k % 4 % 3]) : ""));
    else
      v.tokens.push_back(in.str(6));
  }
  if (flags & 1)
    for (int i = 0; i < n + (flags & 64 ? 1 : 0); ++i)
      v.token_types.push_back(static_cast<int8_t>(in.byte()) % 8);
  if (flags & 2)
    for (int i = 0; i < n; ++i) {
      uint8_t s = in.byte();
      v.scores.push_back(s == 255 ? std::nanf("") : -static_cast<float>(s % 16));
    }
  int m = in.byte() % 24;
  for (int i = 0; i < m; ++i) {
    uint8_t a = in.byte(), b = in.byte();
    if (a < 220)
      v.merges.push_back(v.tokens[a % n] + " " + v.tokens[b % n]);
    else
      v.merges.push_back(in.str(6));
  }
  auto id = [&](uint8_t bit) -> std::optional<int> {
    if (!(in.byte() & bit)) return std::nullopt;
    return static_cast<int>(in.byte() % (n + 2)) - 1;
  };
  v.bos_id = id(1), v.eos_id = id(2), v.unk_id = id(4), v.pad_id = id(8), v.eot_id = id(16);
  uint8_t b = in.byte();
  if (b & 1) v.add_bos = (b & 2) != 0;
  if (b & 4) v.add_eos = (b & 8) != 0;
  if (b & 16) v.add_space_prefix = (b & 32) != 0;
  if (b & 64) v.chat_template = in.str(8);

  std::unique_ptr<nanovllm::Tokenizer> tok;
  try {
    tok = nanovllm::Tokenizer::from_gguf_vocab(v, "fuzz.gguf");
  } catch (const nanovllm::Error&) {
    return 0;
  }
  std::string_view text(reinterpret_cast<const char*>(in.p), in.n);
  auto ids = tok->encode(text, flags & 128);
  std::string full = tok->decode(ids);
  nanovllm::IncrementalDetokenizer d(*tok, false);
  std::string streamed;
  for (int i : ids) streamed += d.push(i);
  streamed += d.finish();
  if (streamed != full) std::abort();
  return 0;
}
