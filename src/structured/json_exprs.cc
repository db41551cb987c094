#include "structured/json_exprs.h"

#include <functional>
#include <map>

#include "structured/regex.h"
#include "tokenizer/utf8.h"

namespace nanovllm::structured {

namespace {

ExprPtr digits(char lo = '0', char hi = '9') { return chars(CodepointSet::range(lo, hi)); }

// Decimal strings of equal length between lo and hi (lo <= hi), digit by digit: a shared first
// digit recurses; otherwise lo's first digit with the rest >= lo's rest, the digits strictly
// between with anything after, and hi's first digit with the rest <= hi's rest.
ExprPtr same_len_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return empty_expr();
  if (lo == hi) return lit(lo);
  size_t n = lo.size() - 1;
  std::string rest_lo = lo.substr(1), rest_hi = hi.substr(1);
  if (lo[0] == hi[0]) return seq({lit(lo.substr(0, 1)), same_len_range(rest_lo, rest_hi)});
  if (rest_lo == std::string(n, '0') && rest_hi == std::string(n, '9'))
    return seq({digits(lo[0], hi[0]), repeat(digits(), static_cast<int>(n), static_cast<int>(n))});
  std::vector<ExprPtr> kids;
  kids.push_back(seq({lit(lo.substr(0, 1)), same_len_range(rest_lo, std::string(n, '9'))}));
  if (lo[0] + 1 <= hi[0] - 1)
    kids.push_back(seq({digits(static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1)),
                        repeat(digits(), static_cast<int>(n), static_cast<int>(n))}));
  kids.push_back(seq({lit(hi.substr(0, 1)), same_len_range(std::string(n, '0'), rest_hi)}));
  return alt(std::move(kids));
}

uint64_t pow10(size_t k) {
  uint64_t p = 1;
  while (k--) p *= 10;
  return p;
}

// Non-negative integers in [a, b] (b absent: unbounded) without leading zeros.
ExprPtr nonneg_range(uint64_t a, std::optional<uint64_t> b) {
  if (b && *b < a) return never_expr();
  size_t la = std::to_string(a).size();
  size_t lb = b ? std::to_string(*b).size() : la;
  std::vector<ExprPtr> kids;
  for (size_t len = la; len <= lb; ++len) {
    uint64_t lo = len == la ? a : pow10(len - 1);
    uint64_t hi = b && len == lb ? *b : (len >= 20 ? UINT64_MAX : pow10(len) - 1);
    kids.push_back(same_len_range(std::to_string(lo), std::to_string(hi)));
  }
  if (!b && la < static_cast<size_t>(kJsonMaxIntDigits))  // more digits than a, up to the bound
    kids.push_back(seq({digits('1', '9'), repeat(digits(), static_cast<int>(la), kJsonMaxIntDigits - 1)}));
  return alt(std::move(kids));
}

uint64_t magnitude(int64_t v) { return v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v); }

}  // namespace

// One shape per gap instead of a run of any whitespace: a model that likes whitespace tokens
// (a random one, or a small real one in a loop) can otherwise spend every token on "\r\n\t".
ExprPtr json_ws(int max_indent) {
  if (max_indent < 0) return empty_expr();
  CodepointSet indent = CodepointSet::single(' ');
  indent.add('\t', '\t');
  return alt({empty_expr(), lit(" "), seq({lit("\n"), repeat(chars(indent), 0, max_indent)})});
}

ExprPtr json_string_char_any() {
  CodepointSet hex = CodepointSet::range('0', '9'), not_d = CodepointSet::range('0', '9'), d;
  hex.add('a', 'f');
  hex.add('A', 'F');
  for (char c : {'a', 'b', 'c', 'e', 'f', 'A', 'B', 'C', 'E', 'F'}) not_d.add(static_cast<uint32_t>(c), static_cast<uint32_t>(c));
  d.add('d', 'd');
  d.add('D', 'D');
  // \uXXXX except the surrogates D800-DFFF: a first digit other than d, or d and then 0-7.
  ExprPtr u = seq({lit("\\u"), alt({seq({chars(not_d), repeat(chars(hex), 3, 3)}),
                                     seq({chars(d), digits('0', '7'), repeat(chars(hex), 2, 2)})})});
  return alt({json_char(CodepointSet::all()), lit("\\/"), u});
}

ExprPtr json_number() {
  ExprPtr int_part = alt({lit("0"), seq({digits('1', '9'), repeat(digits(), 0, kJsonMaxIntDigits - 1)})});
  ExprPtr frac = opt(seq({lit("."), repeat(digits(), 1, kJsonMaxFracDigits)}));
  CodepointSet e = CodepointSet::single('e'), sign = CodepointSet::single('+');
  e.add('E', 'E');
  sign.add('-', '-');
  ExprPtr exp = opt(seq({chars(e), opt(chars(sign)), repeat(digits(), 1, kJsonMaxExpDigits)}));
  return seq({opt(lit("-")), int_part, frac, exp});
}

ExprPtr json_integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) return never_expr();
  std::vector<ExprPtr> kids;
  if (!lo || *lo < 0) {  // negative part: "-" and a magnitude in [max(1, -hi), -lo]
    uint64_t mlo = hi && *hi < 0 ? magnitude(*hi) : 1;
    std::optional<uint64_t> mhi;
    if (lo) mhi = magnitude(*lo);
    kids.push_back(seq({lit("-"), nonneg_range(mlo, mhi)}));
  }
  if (!hi || *hi >= 0) {
    std::optional<uint64_t> nhi;
    if (hi) nhi = static_cast<uint64_t>(*hi);
    kids.push_back(nonneg_range(lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0, nhi));
  }
  return alt(std::move(kids));
}

ExprPtr json_string_content_except(const std::vector<std::string>& names) {
  struct Node {
    std::map<uint32_t, int> kids;
    bool is_name = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& name : names) {
    int t = 0;
    for (size_t i = 0; i < name.size();) {
      uint32_t c = utf8::next_cp(name, i);  // names come from parsed JSON: valid UTF-8
      auto it = trie[t].kids.find(c);
      if (it == trie[t].kids.end()) {
        trie.emplace_back();
        it = trie[t].kids.emplace(c, static_cast<int>(trie.size()) - 1).first;
      }
      t = it->second;
    }
    trie[t].is_name = true;
  }
  ExprPtr any_rest = star(json_char(CodepointSet::all()));
  std::function<ExprPtr(int)> build = [&](int t) -> ExprPtr {
    std::vector<ExprPtr> kids;
    if (!trie[t].is_name) kids.push_back(empty_expr());
    CodepointSet seen;
    for (auto& [c, child] : trie[t].kids) {
      kids.push_back(seq({json_char(CodepointSet::single(c)), build(child)}));
      seen.add(c, c);
    }
    CodepointSet other = CodepointSet::all().minus(seen);
    if (!other.empty()) kids.push_back(seq({json_char(other), any_rest}));
    return alt(std::move(kids));
  };
  return build(0);
}

ExprPtr json_format_content(const std::string& format) {
  static const char* kDate =
      "[1-9][0-9]{3}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"
      "02-(?:0[1-9]|1[0-9]|2[0-8]))";
  // Fractions of a second: at most 9 digits (nanoseconds), for the same reason as numbers.
  static const char* kTime = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
  static const char* kOctet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
  std::string re;
  if (format == "date") re = kDate;
  else if (format == "time") re = kTime;
  else if (format == "date-time") re = std::string(kDate) + "T" + kTime;
  else if (format == "uuid") re = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
  else if (format == "ipv4") re = std::string("(?:") + kOctet + "\\.){3}" + kOctet;
  else if (format == "email") re = "[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)+";
  else return nullptr;
  RegexOptions opt;
  opt.json_string = true;
  return regex_expr(re, opt);
}

}  // namespace nanovllm::structured
