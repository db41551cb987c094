#include "structured/codepoints.h"

#include <utf8proc.h>

#include <algorithm>

#include "tokenizer/utf8.h"

namespace nanovllm::structured {

CodepointSet CodepointSet::range(uint32_t lo, uint32_t hi) {
  CodepointSet s;
  s.add(lo, hi);
  return s;
}

CodepointSet CodepointSet::all() {
  CodepointSet s;
  s.add(0, 0xD7FF);
  s.add(0xE000, kMaxCodepoint);
  return s;
}

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  hi = std::min(hi, kMaxCodepoint);
  if (lo > hi) return;
  // Merge with every range that overlaps or touches [lo, hi].
  std::vector<CpRange> out;
  out.reserve(r_.size() + 1);
  size_t i = 0;
  while (i < r_.size() && r_[i].hi + 1 < lo) out.push_back(r_[i++]);
  while (i < r_.size() && r_[i].lo <= hi + 1) {
    lo = std::min(lo, r_[i].lo);
    hi = std::max(hi, r_[i].hi);
    ++i;
  }
  out.push_back({lo, hi});
  while (i < r_.size()) out.push_back(r_[i++]);
  r_.swap(out);
}

void CodepointSet::add(const CodepointSet& o) {
  for (auto r : o.r_) add(r.lo, r.hi);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet full;
  uint32_t next = 0;
  for (auto r : r_) {
    if (r.lo > next) full.add(next, r.lo - 1);
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) full.add(next, kMaxCodepoint);
  return full.intersect(all());
}

CodepointSet CodepointSet::intersect(const CodepointSet& o) const {
  CodepointSet s;
  size_t i = 0, j = 0;
  while (i < r_.size() && j < o.r_.size()) {
    uint32_t lo = std::max(r_[i].lo, o.r_[j].lo), hi = std::min(r_[i].hi, o.r_[j].hi);
    if (lo <= hi) s.r_.push_back({lo, hi});
    if (r_[i].hi < o.r_[j].hi) ++i;
    else ++j;
  }
  return s;
}

CodepointSet CodepointSet::minus(const CodepointSet& o) const {
  CodepointSet not_o;
  uint32_t next = 0;
  for (auto r : o.r_) {
    if (r.lo > next) not_o.add(next, r.lo - 1);
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) not_o.add(next, kMaxCodepoint);
  return intersect(not_o);
}

bool CodepointSet::contains(uint32_t c) const {
  auto it = std::upper_bound(r_.begin(), r_.end(), c, [](uint32_t v, const CpRange& r) { return v < r.lo; });
  return it != r_.begin() && std::prev(it)->hi >= c;
}

namespace {

// Splits [lo, hi] (same encoded length after the first step) until each piece is a product of
// per-byte ranges: for every continuation-byte suffix of width 6*i bits, either lo and hi agree
// above it, or lo's suffix is all zeros and hi's all ones.
void split_utf8(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>& out) {
  static const uint32_t kMaxOfLen[3] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t m : kMaxOfLen) {
    if (lo <= m && hi > m) {
      split_utf8(lo, m, out);
      split_utf8(m + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  int n = lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
  for (int i = 1; i < n; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_utf8(lo, lo | m, out);
        split_utf8((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_utf8(lo, (hi & ~m) - 1, out);
        split_utf8(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  utf8::append_cp(a, lo);
  utf8::append_cp(b, hi);
  std::vector<ByteRange> seq;
  for (size_t k = 0; k < a.size(); ++k) seq.push_back({static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k])});
  out.push_back(std::move(seq));
}

CodepointSet category_set(bool (*pred)(utf8proc_category_t)) {
  CodepointSet s;
  uint32_t start = 0;
  bool in = false;
  for (uint32_t c = 0; c <= kMaxCodepoint + 1; ++c) {
    bool m = c <= kMaxCodepoint && pred(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
    if (m && !in) start = c;
    if (!m && in) s.add(start, c - 1);
    in = m;
  }
  return s;
}

struct ClassSets {
  CodepointSet narrow_d, wide_d, narrow_w, wide_w, narrow_s, wide_s;
  // Unassigned code points (CN) go into every wide set: the validator's Unicode database may be
  // newer than utf8proc's, so a negated class never generates them.
  ClassSets() {
    narrow_d = CodepointSet::range('0', '9');
    wide_d = category_set([](utf8proc_category_t c) { return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_CN; });
    wide_d.add(narrow_d);
    narrow_w = CodepointSet::range('a', 'z');
    narrow_w.add('A', 'Z');
    narrow_w.add('0', '9');
    narrow_w.add('_', '_');
    wide_w = category_set([](utf8proc_category_t c) {
      return c <= UTF8PROC_CATEGORY_NO || c == UTF8PROC_CATEGORY_PC;  // CN, L*, M*, N*, Pc
    });
    wide_w.add(narrow_w);
    narrow_s = CodepointSet::range('\t', '\r');
    narrow_s.add(' ', ' ');
    wide_s = category_set([](utf8proc_category_t c) {
      return c == UTF8PROC_CATEGORY_CN || c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL ||
             c == UTF8PROC_CATEGORY_ZP;
    });
    wide_s.add(narrow_s);
    wide_s.add(0x1C, 0x1F);
    wide_s.add(0x85, 0x85);
    wide_s.add(0x180E, 0x180E);
    wide_s.add(0x200B, 0x200B);
    wide_s.add(0xFEFF, 0xFEFF);
  }
};

const ClassSets& class_sets() {
  static const ClassSets sets;  // immutable after the thread-safe first call
  return sets;
}

}  // namespace

std::vector<std::vector<ByteRange>> utf8_sequences(const CodepointSet& s) {
  std::vector<std::vector<ByteRange>> out;
  CodepointSet valid = s.intersect(CodepointSet::all());  // named: ranges() refers into it
  for (auto r : valid.ranges()) split_utf8(r.lo, r.hi, out);
  return out;
}

const CodepointSet& class_narrow(char kind) {
  const ClassSets& c = class_sets();
  return kind == 'd' ? c.narrow_d : kind == 'w' ? c.narrow_w : c.narrow_s;
}

const CodepointSet& class_wide(char kind) {
  const ClassSets& c = class_sets();
  return kind == 'd' ? c.wide_d : kind == 'w' ? c.wide_w : c.wide_s;
}

}  // namespace nanovllm::structured
