// Sets of Unicode code points (sorted disjoint ranges) and their UTF-8 encodings as sequences of
// byte ranges, which is how character classes become byte-level automaton edges.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace nanovllm::structured {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

struct CpRange {
  uint32_t lo, hi;  // inclusive
};

class CodepointSet {
 public:
  CodepointSet() = default;
  static CodepointSet range(uint32_t lo, uint32_t hi);
  static CodepointSet single(uint32_t c) { return range(c, c); }
  // Every scalar value: 0..0x10FFFF without the surrogates D800..DFFF (never valid in UTF-8).
  static CodepointSet all();

  void add(uint32_t lo, uint32_t hi);
  void add(const CodepointSet& o);
  CodepointSet complement() const;  // relative to all()
  CodepointSet minus(const CodepointSet& o) const;
  CodepointSet intersect(const CodepointSet& o) const;
  bool contains(uint32_t c) const;
  bool empty() const { return r_.empty(); }
  const std::vector<CpRange>& ranges() const { return r_; }

 private:
  std::vector<CpRange> r_;  // sorted, disjoint, non-adjacent
};

using ByteRange = std::pair<uint8_t, uint8_t>;  // inclusive
// The UTF-8 encodings of the scalar values in `s` (surrogates dropped): a list of sequences of
// 1-4 byte ranges; a byte string encodes a member of `s` iff it matches exactly one sequence.
std::vector<std::vector<ByteRange>> utf8_sequences(const CodepointSet& s);

// Regex shorthand classes. JSON Schema patterns are ECMA-262 regexes (\d = [0-9]) while the
// Python validator reads them with Unicode semantics (\d = any Nd digit), so each class has a
// `narrow` set (inside both meanings: safe to generate from) and a `wide` set (covering both:
// what a negated class must exclude). kind: 'd', 'w' or 's'.
const CodepointSet& class_narrow(char kind);
const CodepointSet& class_wide(char kind);

}  // namespace nanovllm::structured
