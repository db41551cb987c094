// Recursive-descent regex parser producing Exprs (grammar: alt := concat ('|' concat)*,
// concat := repeat*, repeat := atom quantifier*, atom := char | class | group | escape).
#include "structured/regex.h"

#include <nlohmann/json.hpp>

#include "tokenizer/utf8.h"

namespace nanovllm::structured {

namespace {

constexpr int kMaxRepeat = 10000;

// A class member: the set to use when the class is positive, and the set to exclude when it is
// negated (they differ only for \d \w \s, see codepoints.h).
struct ClassItem {
  CodepointSet narrow, wide;
};

class Parser {
 public:
  Parser(std::string_view pattern, const RegexOptions& opt) : opt_(opt) {
    if (!utf8::is_valid(pattern)) fail("is not valid UTF-8");
    for (size_t i = 0; i < pattern.size();) cps_.push_back(utf8::next_cp(pattern, i));
    pattern_ = pattern;
  }

  ExprPtr parse() {
    std::vector<ExprPtr> branches;
    for (;;) {
      bool anchored_start = eat('^');
      bool anchored_end = false;
      ExprPtr body = concat(&anchored_end);
      if (opt_.search) {
        ExprPtr any = star(char_expr(CodepointSet::all()));
        body = seq({anchored_start ? empty_expr() : any, body, anchored_end ? empty_expr() : any});
      }
      branches.push_back(body);
      if (at_end()) break;
      if (!eat('|')) fail("has an unmatched ')'", pos_);
    }
    return alt(std::move(branches));
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t at = SIZE_MAX) const {
    std::string where = at == SIZE_MAX ? "" : " at character " + std::to_string(at);
    throw ConstraintError("regex '" + std::string(pattern_) + "' " + what + where);
  }
  bool at_end() const { return pos_ >= cps_.size(); }
  uint32_t peek(size_t k = 0) const { return pos_ + k < cps_.size() ? cps_[pos_ + k] : 0xFFFFFFFF; }
  bool eat(uint32_t c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }

  ExprPtr char_expr(const CodepointSet& s) const {
    if (opt_.json_string) return json_char(s);
    return chars(s);
  }

  ExprPtr alternation() {
    std::vector<ExprPtr> branches{concat(nullptr)};
    while (eat('|')) branches.push_back(concat(nullptr));
    return alt(std::move(branches));
  }

  // `top_end` is non-null at the top level, where a `$` may end the alternative.
  ExprPtr concat(bool* top_end) {
    std::vector<ExprPtr> items;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        size_t at = pos_++;
        if (top_end && (at_end() || peek() == '|')) {
          *top_end = true;
          break;
        }
        fail("uses '$' inside the pattern (only at the end of an alternative is supported)", at);
      }
      if (peek() == '^') fail("uses '^' inside the pattern (only at the start of an alternative is supported)", pos_);
      items.push_back(quantified());
    }
    return items.empty() ? empty_expr() : seq(std::move(items));
  }

  ExprPtr quantified() {
    ExprPtr e = atom();
    bool quantified = false;
    for (;;) {
      size_t at = pos_;
      int lo, hi;
      if (eat('*')) lo = 0, hi = -1;
      else if (eat('+')) lo = 1, hi = -1;
      else if (eat('?')) lo = 0, hi = 1;
      else if (!counted(&lo, &hi)) break;
      if (quantified) fail("has a repeated quantifier", at);
      quantified = true;
      if (peek() == '+') fail("uses a possessive quantifier", pos_);
      eat('?');  // lazy: same language
      e = repeat(e, lo, hi);
    }
    return e;
  }

  // {n} {n,} {,m} {n,m}; anything else leaves '{' to be read as a literal (as Python does).
  bool counted(int* lo, int* hi) {
    if (peek() != '{') return false;
    size_t save = pos_++;
    auto number = [&](int* out) {
      long v = -1;
      while (peek() >= '0' && peek() <= '9') {
        v = (v < 0 ? 0 : v) * 10 + (peek() - '0');
        if (v > kMaxRepeat) fail("has a repetition count above " + std::to_string(kMaxRepeat), save);
        ++pos_;
      }
      *out = static_cast<int>(v);
      return v >= 0;
    };
    bool has_lo = number(lo);
    if (eat('}')) {
      if (has_lo) {
        *hi = *lo;
        return true;
      }
    } else if (eat(',')) {
      bool has_hi = number(hi);
      if ((has_lo || has_hi) && eat('}')) {
        if (!has_lo) *lo = 0;
        if (!has_hi) *hi = -1;
        if (*hi >= 0 && *hi < *lo) fail("has a repetition {n,m} with m < n", save);
        return true;
      }
    }
    pos_ = save;
    return false;
  }

  ExprPtr atom() {
    size_t at = pos_;
    uint32_t c = cps_[pos_++];
    switch (c) {
      case '(': return group(at);
      case '[': return char_expr(char_class());
      case '.': return char_expr(CodepointSet::all().minus(CodepointSet::single('\n')));
      case '\\': {
        ClassItem item = escape(false);
        return char_expr(item.narrow);
      }
      case '*': case '+': case '?': fail("has nothing to repeat", at);
      case ')': fail("has an unmatched ')'", at);
      default: return char_expr(CodepointSet::single(c));
    }
  }

  ExprPtr group(size_t at) {
    if (eat('?')) {
      if (eat(':')) {
      } else if (peek() == 'P' && peek(1) == '<') {
        pos_ += 2;
        skip_name(at);
      } else if (peek() == '<' && peek(1) != '=' && peek(1) != '!') {
        ++pos_;
        skip_name(at);
      } else if (peek() == '=' || peek() == '!' || peek() == '<') {
        fail("uses lookaround assertions", at);
      } else if (peek() == 'P' && peek(1) == '=') {
        fail("uses a named backreference", at);
      } else {
        fail("uses an inline flag or extension group '(?'", at);
      }
    }
    ExprPtr e = alternation();
    if (!eat(')')) fail("has an unclosed '('", at);
    return e;
  }

  void skip_name(size_t at) {
    while (!at_end() && peek() != '>') ++pos_;
    if (!eat('>')) fail("has an unterminated group name", at);
  }

  CodepointSet char_class() {
    size_t at = pos_ - 1;
    bool negated = eat('^');
    CodepointSet narrow, wide;
    bool first = true;
    for (;;) {
      if (at_end()) fail("has an unterminated '['", at);
      if (peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (peek() == '[' && peek(1) == ':') fail("uses POSIX classes [:name:]", pos_);
      ClassItem lo = class_atom();
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFF) {
        size_t dash = pos_++;
        ClassItem hi = class_atom();
        auto single = [](const ClassItem& x) { return x.narrow.ranges().size() == 1 && x.narrow.ranges()[0].lo == x.narrow.ranges()[0].hi; };
        if (!single(lo) || !single(hi)) fail("has a class range with a shorthand (\\d, \\w...) as an end", dash);
        uint32_t a = lo.narrow.ranges()[0].lo, b = hi.narrow.ranges()[0].lo;
        if (a > b) fail("has a reversed class range", dash);
        lo.narrow = lo.wide = CodepointSet::range(a, b);
      }
      narrow.add(lo.narrow);
      wide.add(lo.wide);
    }
    return negated ? wide.complement() : narrow;
  }

  ClassItem class_atom() {
    uint32_t c = cps_[pos_++];
    if (c == '\\') return escape(true);
    return {CodepointSet::single(c), CodepointSet::single(c)};
  }

  uint32_t hex(int digits, size_t at) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      uint32_t d = peek();
      int x = d >= '0' && d <= '9' ? d - '0' : d >= 'a' && d <= 'f' ? d - 'a' + 10 : d >= 'A' && d <= 'F' ? d - 'A' + 10 : -1;
      if (x < 0) fail("has a bad hex escape", at);
      v = v * 16 + static_cast<uint32_t>(x);
      ++pos_;
    }
    if (v > kMaxCodepoint) fail("has an escape beyond U+10FFFF", at);
    return v;
  }

  // After a backslash. Inside a class, \b is a backspace.
  ClassItem escape(bool in_class) {
    size_t at = pos_ - 1;
    if (at_end()) fail("ends with a backslash", at);
    uint32_t c = cps_[pos_++];
    auto one = [](uint32_t x) { return ClassItem{CodepointSet::single(x), CodepointSet::single(x)}; };
    switch (c) {
      case 'd': case 'w': case 's': {
        char k = static_cast<char>(c);
        return {class_narrow(k), class_wide(k)};
      }
      case 'D': case 'W': case 'S': {
        char k = static_cast<char>(c - 'A' + 'a');
        return {class_wide(k).complement(), class_narrow(k).complement()};
      }
      case 'n': return one('\n');
      case 't': return one('\t');
      case 'r': return one('\r');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0': return one(0);
      case 'a': return one(7);
      case 'x': return one(hex(2, at));
      case 'u': return one(hex(4, at));
      case 'U': return one(hex(8, at));
      case 'b':
        if (in_class) return one(8);
        fail("uses a word boundary \\b", at);
      case 'B': fail("uses a word boundary \\B", at);
      case 'A': case 'Z': case 'z': case 'G': fail("uses the anchor \\" + std::string(1, static_cast<char>(c)), at);
      case 'p': case 'P': fail("uses Unicode property classes \\p{...}", at);
      default: break;
    }
    if (c >= '1' && c <= '9') fail("uses a backreference", at);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) fail("has an unknown escape \\" + std::string(1, static_cast<char>(c)), at);
    return one(c);  // escaped punctuation (or any other character) stands for itself
  }

  RegexOptions opt_;
  std::string_view pattern_;
  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
};

}  // namespace

ExprPtr regex_expr(std::string_view pattern, const RegexOptions& opt) { return Parser(pattern, opt).parse(); }

ExprPtr json_char(const CodepointSet& set) {
  CodepointSet special = CodepointSet::range(0, 0x1F);
  special.add('"', '"');
  special.add('\\', '\\');
  std::vector<ExprPtr> kids;
  CodepointSet plain = set.minus(special);
  if (!plain.empty()) kids.push_back(chars(plain));
  CodepointSet escaped = set.intersect(special);
  for (auto r : escaped.ranges())
    for (uint32_t c = r.lo; c <= r.hi; ++c) {
      std::string q = json_quote(std::string(1, static_cast<char>(c)));
      kids.push_back(lit(q.substr(1, q.size() - 2)));
    }
  return alt(std::move(kids));
}

std::string json_quote(std::string_view utf8) { return nlohmann::json(std::string(utf8)).dump(); }

}  // namespace nanovllm::structured
