// A main() for the libFuzzer targets in tests/fuzz/ without libFuzzer: make test's fuzz smoke runs
// them in the GCC ASan/UBSan build (make asan), so the fuzz targets need no clang build of every
// library there. It replays every corpus input, then feeds inputs mutated from the corpus with a
// fixed seed (reproducible) for -seconds. Coverage-guided fuzzing stays `make fuzz` (clang).
//
//   fuzz_smoke_<name> [-seconds=N] [-seed=S] [-max_len=B] [-artifact_prefix=DIR/] [CORPUS ...]
//
// CORPUS: files or folders of files. A sanitizer report or an abort leaves the input that caused
// it in <artifact_prefix>crash-input (then the process dies with the sanitizer's exit code).
// Exit 0 when every input ran; 2 on a bad argument or an unreadable corpus.
#include <sanitizer/common_interface_defs.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::string g_artifact = "./";
const std::vector<uint8_t>* g_current = nullptr;  // the input being run, for the crash file

void save_current() {
  if (!g_current) return;
  const std::string path = g_artifact + "crash-input";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(g_current->data(), 1, g_current->size(), f);
    std::fclose(f);
    std::fprintf(stderr, "fuzz-smoke: the input is in %s (%zu bytes)\n", path.c_str(), g_current->size());
  }
}

void on_signal(int sig) {
  save_current();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

bool read_file(const std::filesystem::path& p, std::vector<uint8_t>& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

void run(const std::vector<uint8_t>& input) {
  g_current = &input;
  // A copy of exactly input.size() bytes, so ASan sees a read past the end of the input.
  std::vector<uint8_t> copy(input);
  LLVMFuzzerTestOneInput(copy.empty() ? nullptr : copy.data(), copy.size());
  g_current = nullptr;
}

// Bytes that matter to the parsers under test (JSON, HTTP, Jinja, GGUF headers).
constexpr uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, '{', '}', '[', ']', '"', '\\', ':',
                                    ',', '\n', '\r', ' ', '%', '<', '>', '0', '9', '-', 'e'};

void mutate(std::vector<uint8_t>& x, const std::vector<std::vector<uint8_t>>& corpus, size_t max_len,
            std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  const int n_mut = 1 + static_cast<int>(rng() % 4);
  for (int m = 0; m < n_mut; ++m) {
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (!x.empty()) x[pick(x.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // a random byte
        if (!x.empty()) x[pick(x.size())] = static_cast<uint8_t>(rng());
        break;
      case 2:  // insert an interesting byte
        if (x.size() < max_len)
          x.insert(x.begin() + static_cast<std::ptrdiff_t>(pick(x.size() + 1)),
                   kInteresting[pick(sizeof kInteresting)]);
        break;
      case 3: {  // erase a range
        if (x.empty()) break;
        const size_t at = pick(x.size()), n = 1 + pick(std::min<size_t>(16, x.size() - at));
        x.erase(x.begin() + static_cast<std::ptrdiff_t>(at), x.begin() + static_cast<std::ptrdiff_t>(at + n));
        break;
      }
      case 4: {  // duplicate a chunk (nesting, repetition)
        if (x.empty() || x.size() >= max_len) break;
        const size_t at = pick(x.size()), n = 1 + pick(std::min<size_t>(64, x.size() - at));
        std::vector<uint8_t> chunk(x.begin() + static_cast<std::ptrdiff_t>(at),
                                   x.begin() + static_cast<std::ptrdiff_t>(at + n));
        x.insert(x.begin() + static_cast<std::ptrdiff_t>(pick(x.size() + 1)), chunk.begin(), chunk.end());
        break;
      }
      case 5: {  // splice in part of another corpus input
        if (corpus.empty()) break;
        const auto& other = corpus[pick(corpus.size())];
        if (other.empty()) break;
        const size_t at = pick(other.size()), n = 1 + pick(other.size() - at);
        x.insert(x.begin() + static_cast<std::ptrdiff_t>(pick(x.size() + 1)),
                 other.begin() + static_cast<std::ptrdiff_t>(at),
                 other.begin() + static_cast<std::ptrdiff_t>(at + n));
        break;
      }
      default:  // truncate
        if (!x.empty()) x.resize(pick(x.size()));
        break;
    }
  }
  if (x.size() > max_len) x.resize(max_len);
}

bool flag(const char* arg, const char* name, std::string& value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0) return false;
  value = arg + n;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0;
  uint64_t seed = 1;
  size_t max_len = 4096;
  std::vector<std::vector<uint8_t>> corpus;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    try {
      if (flag(argv[i], "-seconds=", v)) { seconds = std::stod(v); continue; }
      if (flag(argv[i], "-seed=", v)) { seed = std::stoull(v); continue; }
      if (flag(argv[i], "-max_len=", v)) { max_len = std::stoull(v); continue; }
    } catch (const std::exception&) {
      std::fprintf(stderr, "fuzz-smoke: bad value in '%s'\n", argv[i]);
      return 2;
    }
    if (flag(argv[i], "-artifact_prefix=", v)) { g_artifact = v; continue; }
    if (argv[i][0] == '-') {
      std::fprintf(stderr, "fuzz-smoke: unknown option '%s'\n", argv[i]);
      return 2;
    }
    std::error_code ec;
    const std::filesystem::path p(argv[i]);
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(p, ec)) {
      for (const auto& e : std::filesystem::directory_iterator(p, ec))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());  // directory order is not stable across machines
    } else {
      files.push_back(p);
    }
    for (const auto& f : files) {
      corpus.emplace_back();
      if (!read_file(f, corpus.back())) {
        std::fprintf(stderr, "fuzz-smoke: cannot read %s\n", f.c_str());
        return 2;
      }
    }
  }
  __sanitizer_set_death_callback(save_current);
  std::signal(SIGABRT, on_signal);
  std::signal(SIGSEGV, on_signal);

  size_t runs = 0;
  run({});
  ++runs;
  for (const auto& c : corpus) {
    run(c);
    ++runs;
  }
  const size_t corpus_runs = runs;
  std::mt19937_64 rng(seed);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<uint8_t> x;
  while (std::chrono::steady_clock::now() < end) {
    x = corpus.empty() ? std::vector<uint8_t>{} : corpus[rng() % corpus.size()];
    mutate(x, corpus, max_len, rng);
    run(x);
    ++runs;
  }
  std::printf("fuzz-smoke: %zu inputs (%zu from the corpus, %zu mutated; seed %llu)\n", runs,
              corpus_runs, runs - corpus_runs, static_cast<unsigned long long>(seed));
  return 0;
}
