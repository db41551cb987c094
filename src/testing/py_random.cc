#include "testing/py_random.h"

#include <bit>

#include "util/check.h"

namespace nanovllm {

// MT19937 parameters (Matsumoto & Nishimura); N = 624, M = 397.
namespace {
constexpr int kN = 624;
constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfu;
constexpr uint32_t kUpper = 0x80000000u;
constexpr uint32_t kLower = 0x7fffffffu;
}  // namespace

PyRandom::PyRandom(uint64_t seed) {
  std::vector<uint32_t> key;
  for (uint64_t n = seed; n != 0; n >>= 32) key.push_back(static_cast<uint32_t>(n));
  if (key.empty()) key.push_back(0);
  init_by_array(key);
}

void PyRandom::init_genrand(uint32_t s) {
  mt_[0] = s;
  for (int i = 1; i < kN; ++i)
    mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  mti_ = kN;
}

void PyRandom::init_by_array(const std::vector<uint32_t>& key) {
  init_genrand(19650218u);
  int i = 1;
  size_t j = 0;
  const int len = static_cast<int>(key.size());
  for (int k = kN > len ? kN : len; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] +
             static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) -
             static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;  // guarantees a non-zero initial state
  mti_ = kN;
}

uint32_t PyRandom::genrand_uint32() {
  if (mti_ >= kN) {
    auto twist = [](uint32_t a, uint32_t b) {
      const uint32_t y = (a & kUpper) | (b & kLower);
      return (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
    };
    int k = 0;
    for (; k < kN - kM; ++k) mt_[k] = mt_[k + kM] ^ twist(mt_[k], mt_[k + 1]);
    for (; k < kN - 1; ++k) mt_[k] = mt_[k + (kM - kN)] ^ twist(mt_[k], mt_[k + 1]);
    mt_[kN - 1] = mt_[kM - 1] ^ twist(mt_[kN - 1], mt_[0]);
    mti_ = 0;
  }
  uint32_t y = mt_[mti_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= (y >> 18);
  return y;
}

uint64_t PyRandom::getrandbits(int k) {
  NV_CHECK(k >= 0 && k <= 64, "getrandbits(k) supports 0 <= k <= 64, got ", k);
  if (k == 0) return 0;
  if (k <= 32) return genrand_uint32() >> (32 - k);
  const uint64_t lo = genrand_uint32();
  const uint64_t hi = genrand_uint32() >> (64 - k);
  return lo | (hi << 32);
}

int64_t PyRandom::randbelow(int64_t n) {
  NV_CHECK_GT(n, 0, "randbelow needs n > 0");
  const int k = 64 - std::countl_zero(static_cast<uint64_t>(n));  // n.bit_length()
  uint64_t r = getrandbits(k);
  while (r >= static_cast<uint64_t>(n)) r = getrandbits(k);
  return static_cast<int64_t>(r);
}

int64_t PyRandom::randint(int64_t a, int64_t b) {
  NV_CHECK_LE(a, b, "randint(a, b) needs a <= b");
  return a + randbelow(b - a + 1);
}

double PyRandom::random() {
  const uint32_t a = genrand_uint32() >> 5;
  const uint32_t b = genrand_uint32() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

BenchWorkload make_bench_workload(int num_seqs, int min_in, int max_in, int min_out, int max_out,
                                  int vocab_max, uint64_t seed) {
  PyRandom rng(seed);
  BenchWorkload w;
  w.prompts.resize(static_cast<size_t>(num_seqs));
  for (auto& p : w.prompts) {
    const int64_t len = rng.randint(min_in, max_in);  // the range is evaluated first
    p.reserve(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) p.push_back(static_cast<int>(rng.randint(0, vocab_max)));
  }
  w.max_tokens.reserve(static_cast<size_t>(num_seqs));
  for (int i = 0; i < num_seqs; ++i)
    w.max_tokens.push_back(static_cast<int>(rng.randint(min_out, max_out)));
  return w;
}

}  // namespace nanovllm
