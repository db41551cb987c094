#include "tokenizer/added_vocab.h"

#include <utf8proc.h>

#include <algorithm>

#include "tokenizer/utf8.h"

namespace nanovllm {
namespace {

bool is_word_cp(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  auto c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
         (c >= UTF8PROC_CATEGORY_MN && c <= UTF8PROC_CATEGORY_ME) ||
         (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO) || c == UTF8PROC_CATEGORY_PC;
}

// Rust's char::is_whitespace (the Unicode White_Space property).
bool is_ws_cp(uint32_t cp) {
  return (cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// Start of the UTF-8 character that ends at s[e-1].
size_t prev_char_start(std::string_view s, size_t e) {
  size_t i = e - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

bool ends_with_word(std::string_view s, size_t e) {
  if (e == 0) return false;
  size_t i = prev_char_start(s, e);
  return is_word_cp(utf8::next_cp(s, i));
}

bool starts_with_word(std::string_view s, size_t b) {
  if (b >= s.size()) return false;
  return is_word_cp(utf8::next_cp(s, b));
}

}  // namespace

void AddedTokenMatcher::build(std::vector<AddedToken> tokens, std::vector<std::string> patterns) {
  tokens_ = std::move(tokens);
  patterns_ = std::move(patterns);
  for (auto& v : by_first_byte_) v.clear();
  for (size_t k = 0; k < patterns_.size(); ++k)
    if (!patterns_[k].empty())
      by_first_byte_[static_cast<unsigned char>(patterns_[k][0])].push_back(static_cast<int>(k));
  for (auto& v : by_first_byte_)
    std::stable_sort(v.begin(), v.end(), [&](int a, int b) { return patterns_[a].size() > patterns_[b].size(); });
}

int AddedTokenMatcher::longest_at(std::string_view s, size_t i) const {
  for (int k : by_first_byte_[static_cast<unsigned char>(s[i])]) {
    const std::string& p = patterns_[k];
    if (p.size() <= s.size() - i && std::string_view(s.data() + i, p.size()) == p) return k;
  }
  return -1;
}

std::vector<Segment> AddedTokenMatcher::split(std::string_view s) const {
  std::vector<Segment> out;
  size_t start_offset = 0;  // end of the last emitted token
  size_t i = 0;
  while (i < s.size()) {
    int k = by_first_byte_[static_cast<unsigned char>(s[i])].empty() ? -1 : longest_at(s, i);
    if (k < 0) {
      ++i;
      continue;
    }
    const AddedToken& t = tokens_[k];
    size_t b = i, e = i + patterns_[k].size();
    i = e;  // the search resumes after this match whether or not it is kept
    if (b < start_offset) continue;  // swallowed by a previous token's rstrip
    if (t.single_word && (ends_with_word(s, b) || starts_with_word(s, e))) continue;
    if (t.lstrip) {
      while (b > start_offset) {
        size_t p = prev_char_start(s, b);
        size_t q = p;
        if (!is_ws_cp(utf8::next_cp(s, q))) break;
        b = p;
      }
    }
    if (t.rstrip) {
      while (e < s.size()) {
        size_t q = e;
        if (!is_ws_cp(utf8::next_cp(s, q))) break;
        e = q;
      }
      i = std::max(i, e);
    }
    if (b > start_offset) out.push_back({-1, start_offset, b});
    out.push_back({t.id, b, e});
    start_offset = e;
  }
  if (start_offset < s.size()) out.push_back({-1, start_offset, s.size()});
  return out;
}

}  // namespace nanovllm
