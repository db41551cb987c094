// Code point sets and their UTF-8 byte-range sequences, checked exhaustively against direct
// encoding of every scalar value.
#include <gtest/gtest.h>

#include <random>

#include "structured/codepoints.h"
#include "tokenizer/utf8.h"

namespace nanovllm::structured {
namespace {

// Number of sequences matching `bytes` exactly.
int matches(const std::vector<std::vector<ByteRange>>& seqs, const std::string& bytes) {
  int n = 0;
  for (auto& s : seqs) {
    if (s.size() != bytes.size()) continue;
    bool ok = true;
    for (size_t k = 0; k < s.size() && ok; ++k) {
      uint8_t b = static_cast<uint8_t>(bytes[k]);
      ok = s[k].first <= b && b <= s[k].second;
    }
    n += ok;
  }
  return n;
}

void check_exhaustive(const CodepointSet& set) {
  auto seqs = utf8_sequences(set);
  for (uint32_t c = 0; c <= kMaxCodepoint; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    std::string b;
    utf8::append_cp(b, c);
    ASSERT_EQ(matches(seqs, b), set.contains(c) ? 1 : 0) << "code point " << c;
  }
  // No sequence admits an encoded surrogate (ED A0..BF xx).
  for (auto& s : seqs)
    if (s.size() == 3 && s[0].first <= 0xED && 0xED <= s[0].second) {
      EXPECT_LT(s[1].first, 0xA0);
    }
}

TEST(Codepoints, SequencesOfAllScalars) { check_exhaustive(CodepointSet::all()); }

TEST(Codepoints, SequencesOfRandomSets) {
  std::mt19937 rng(7);
  for (int t = 0; t < 4; ++t) {
    CodepointSet s;
    for (int k = 0; k < 6; ++k) {
      uint32_t a = rng() % (kMaxCodepoint + 1), len = rng() % (t % 2 ? 300 : 70000);
      s.add(a, a + len);
    }
    s.add(0x7F, 0x81);      // around the 1/2-byte boundary
    s.add(0xFFFE, 0x10001);  // around the 3/4-byte boundary
    check_exhaustive(s);
  }
}

TEST(Codepoints, SetOperationsMatchBruteForce) {
  CodepointSet a = CodepointSet::range(10, 20), b = CodepointSet::range(15, 30);
  a.add(40, 50);
  b.add(45, 45);
  CodepointSet u = a;
  u.add(b);
  CodepointSet i = a.intersect(b), m = a.minus(b), c = a.complement();
  for (uint32_t x = 0; x < 100; ++x) {
    bool in_a = (x >= 10 && x <= 20) || (x >= 40 && x <= 50), in_b = (x >= 15 && x <= 30) || x == 45;
    EXPECT_EQ(u.contains(x), in_a || in_b) << x;
    EXPECT_EQ(i.contains(x), in_a && in_b) << x;
    EXPECT_EQ(m.contains(x), in_a && !in_b) << x;
    EXPECT_EQ(c.contains(x), !in_a) << x;
  }
  EXPECT_FALSE(c.contains(0xD800));  // complement stays within scalar values
  EXPECT_TRUE(c.contains(kMaxCodepoint));
  // Adjacent ranges merge.
  CodepointSet adj = CodepointSet::range(1, 5);
  adj.add(6, 9);
  EXPECT_EQ(adj.ranges().size(), 1u);
}

TEST(Codepoints, ShorthandClassesNarrowInsideWide) {
  for (char k : {'d', 'w', 's'}) {
    EXPECT_TRUE(class_narrow(k).minus(class_wide(k)).empty()) << k;
  }
  EXPECT_TRUE(class_wide('d').contains(0x0663));  // ARABIC-INDIC DIGIT THREE: Python's \d
  EXPECT_FALSE(class_narrow('d').contains(0x0663));
  EXPECT_TRUE(class_wide('s').contains(0x2003));  // EM SPACE
  EXPECT_TRUE(class_wide('w').contains(0x00E9));  // é
}

}  // namespace
}  // namespace nanovllm::structured
