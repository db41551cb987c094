// Bit-exact re-implementation of CPython's `random` module (MT19937) for the parts nano-vLLM's
// bench.py uses, so the C++ benchmark replays the same workload as the Python original.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace nanovllm {

class PyRandom {
 public:
  // Like random.seed(n) for a non-negative int: init_by_array with the 32-bit words of n,
  // least significant first (one word 0 for n == 0).
  explicit PyRandom(uint64_t seed);
  uint32_t genrand_uint32();
  // random.getrandbits(k), 0 <= k <= 64; for k > 32 the first word drawn is the low word.
  uint64_t getrandbits(int k);
  // random._randbelow_with_getrandbits(n), n >= 1: rejection sampling on n.bit_length() bits.
  int64_t randbelow(int64_t n);
  int64_t randint(int64_t a, int64_t b);  // a + randbelow(b - a + 1)
  double random();                        // 53-bit float in [0, 1)

 private:
  void init_genrand(uint32_t s);
  void init_by_array(const std::vector<uint32_t>& key);
  std::array<uint32_t, 624> mt_{};
  int mti_ = 625;
};

// bench.py's workload: random.seed(seed); prompts = [[randint(0, vocab_max) for _ in
// range(randint(min_in, max_in))] for _ in range(num_seqs)]; then max_tokens =
// [randint(min_out, max_out) for each sequence].
struct BenchWorkload {
  std::vector<std::vector<int>> prompts;
  std::vector<int> max_tokens;
};
BenchWorkload make_bench_workload(int num_seqs = 256, int min_in = 100, int max_in = 1024,
                                  int min_out = 100, int max_out = 1024, int vocab_max = 10000,
                                  uint64_t seed = 0);

}  // namespace nanovllm
