// PyRandom must replay CPython's `random` bit for bit. Expected values were produced with
// Debian's CPython 3.11.2 (/usr/bin/python3) by:
//   import random
//   random.seed(0)
//   print([random.randint(0,10000) for _ in range(10)])
//   print(random.getrandbits(64)); print(repr(random.random()))
//   print(random.getrandbits(32), random.getrandbits(7), random.getrandbits(33))
//   random.seed(0); print([random.getrandbits(32) for _ in range(3)])
//   random.seed(12345678901234567890)
//   print([random.randint(0,10000) for _ in range(3)], random.getrandbits(64))
//   random.seed(0)
//   p=[[random.randint(0, 10000) for _ in range(random.randint(100, 1024))] for _ in range(256)]
//   m=[random.randint(100, 1024) for _ in range(256)]
//   print(sum(map(len,p)), sum(m), p[0][:5], len(p[0]), m[:3], p[255][-3:])
#include <gtest/gtest.h>

#include <numeric>

#include "util/check.h"
#include "testing/py_random.h"

namespace nanovllm {
namespace {

TEST(PyRandom, FirstDrawsMatchCPython) {
  PyRandom r(0);
  const int64_t expect[10] = {6311, 6890, 663, 4242, 8376, 7961, 6634, 4969, 7808, 5866};
  for (int64_t e : expect) EXPECT_EQ(r.randint(0, 10000), e);
  EXPECT_EQ(r.getrandbits(64), 16448235973081859711ull);
  EXPECT_EQ(r.random(), 0.9081128851953352);
  EXPECT_EQ(r.getrandbits(32), 2167613558ull);
  EXPECT_EQ(r.getrandbits(7), 17ull);
  EXPECT_EQ(r.getrandbits(33), 1210484339ull);
}

TEST(PyRandom, RawWordsAndLargeSeed) {
  PyRandom r(0);
  EXPECT_EQ(r.genrand_uint32(), 3626764237u);
  EXPECT_EQ(r.genrand_uint32(), 1654615998u);
  EXPECT_EQ(r.genrand_uint32(), 3255389356u);
  PyRandom big(12345678901234567890ull);  // two 32-bit key words
  EXPECT_EQ(big.randint(0, 10000), 8388);
  EXPECT_EQ(big.randint(0, 10000), 8958);
  EXPECT_EQ(big.randint(0, 10000), 7332);
  EXPECT_EQ(big.getrandbits(64), 6025744592013140765ull);
}

TEST(PyRandom, BadArguments) {
  PyRandom r(1);
  EXPECT_THROW(r.randbelow(0), Error);
  EXPECT_THROW(r.randint(5, 4), Error);
  EXPECT_THROW(r.getrandbits(65), Error);
  EXPECT_EQ(r.getrandbits(0), 0u);
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = r.randint(-3, 3);
    EXPECT_GE(v, -3);
    EXPECT_LE(v, 3);
  }
}

TEST(PyRandom, BenchWorkloadMatchesBenchPy) {
  BenchWorkload w = make_bench_workload();
  ASSERT_EQ(w.prompts.size(), 256u);
  ASSERT_EQ(w.max_tokens.size(), 256u);
  int64_t in = 0;
  for (const auto& p : w.prompts) {
    EXPECT_GE(p.size(), 100u);
    EXPECT_LE(p.size(), 1024u);
    in += static_cast<int64_t>(p.size());
  }
  EXPECT_EQ(in, 142827);
  EXPECT_EQ(std::accumulate(w.max_tokens.begin(), w.max_tokens.end(), int64_t{0}), 133966);
  EXPECT_EQ(w.prompts[0].size(), 964u);
  EXPECT_EQ(std::vector<int>(w.prompts[0].begin(), w.prompts[0].begin() + 5),
            (std::vector<int>{6311, 6890, 663, 4242, 8376}));
  EXPECT_EQ(std::vector<int>(w.prompts[255].end() - 3, w.prompts[255].end()),
            (std::vector<int>{6642, 9046, 1958}));
  EXPECT_EQ(std::vector<int>(w.max_tokens.begin(), w.max_tokens.begin() + 3),
            (std::vector<int>{845, 312, 607}));
}

}  // namespace
}  // namespace nanovllm
