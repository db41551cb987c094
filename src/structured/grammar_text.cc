#include "structured/grammar_text.h"

#include <cctype>
#include <map>
#include <set>

#include "structured/regex.h"

namespace nanovllm::structured {
namespace {

void append_utf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

// A cursor over the grammar text with line numbers for messages.
class Text {
 public:
  Text(std::string_view s, const char* syntax) : s_(s), syntax_(syntax) {}
  bool eof() const { return i_ >= s_.size(); }
  char peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  char get() { return s_[i_++]; }
  size_t pos() const { return i_; }
  void seek(size_t p) { i_ = p; }
  bool starts(std::string_view w) const { return s_.substr(i_, w.size()) == w; }

  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) line += s_[k] == '\n';
    throw ConstraintError(std::string(syntax_) + " grammar, line " + std::to_string(line) + ": " + what);
  }

  // Skips spaces, tabs, newlines (when `newlines`) and comments (`comment` starts one).
  void skip(bool newlines, std::string_view comment) {
    for (;;) {
      while (!eof() && (peek() == ' ' || peek() == '\t' || peek() == '\r' || (newlines && peek() == '\n'))) ++i_;
      if (!eof() && starts(comment)) {
        while (!eof() && peek() != '\n') ++i_;
        continue;
      }
      return;
    }
  }

  std::string name() {
    const size_t b = i_;
    while (!eof() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_' || peek() == '-')) ++i_;
    return std::string(s_.substr(b, i_ - b));
  }

  // One (possibly escaped) code point of a literal or class; `extra` lists the characters that
  // may follow a backslash as themselves.
  uint32_t codepoint(std::string_view extra) {
    if (eof()) fail("unterminated literal or class");
    const unsigned char c = static_cast<unsigned char>(get());
    if (c != '\\') {
      // A raw UTF-8 sequence: decode it so that classes see code points.
      if (c < 0x80) return c;
      int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
      if (n < 0) fail("invalid UTF-8 in the grammar text");
      uint32_t cp = c & (0x3F >> n);
      for (int k = 0; k < n; ++k) {
        if (eof() || (static_cast<unsigned char>(peek()) & 0xC0) != 0x80) fail("invalid UTF-8 in the grammar text");
        cp = (cp << 6) | (static_cast<unsigned char>(get()) & 0x3F);
      }
      return cp;
    }
    if (eof()) fail("a backslash ends the text");
    const char e = get();
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0': return 0;
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      default:
        if (e == '\\' || extra.find(e) != std::string_view::npos) return uint32_t(static_cast<unsigned char>(e));
        fail(std::string("unknown escape \\") + e);
    }
  }

 private:
  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const char h = eof() ? '\0' : get();
      if (!std::isxdigit(static_cast<unsigned char>(h))) fail("bad hex escape");
      v = v * 16 + uint32_t(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
    }
    if (v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) fail("escape is not a Unicode scalar value");
    return v;
  }

  std::string_view s_;
  const char* syntax_;
  size_t i_ = 0;
};

// Rule names -> ids in one builder, with definition bookkeeping.
struct Rules {
  GrammarBuilder& b;
  std::map<std::string, int> ids;
  std::set<std::string> defined;
  std::map<std::string, size_t> first_use;  // name -> text position (messages)

  int id(const std::string& name) {
    auto it = ids.find(name);
    if (it != ids.end()) return it->second;
    const int r = b.add_rule(name);
    ids[name] = r;
    return r;
  }
  void check_defined(Text& t) {
    for (const auto& [name, at] : first_use)
      if (!defined.count(name)) {
        t.seek(at);
        t.fail("rule '" + name + "' is used but never defined");
      }
  }
};

// `*`, `+` or `?` after an item (both syntaxes): applies it to `e` and returns true.
bool simple_repeat(Text& t, ExprPtr& e) {
  switch (t.peek()) {
    case '*': t.get(); e = star(e); return true;
    case '+': t.get(); e = repeat(e, 1, -1); return true;
    case '?': t.get(); e = opt(e); return true;
    default: return false;
  }
}

int parse_count(Text& t) {
  if (!std::isdigit(static_cast<unsigned char>(t.peek()))) t.fail("expected a number in a repetition");
  long v = 0;
  while (std::isdigit(static_cast<unsigned char>(t.peek()))) {
    v = v * 10 + (t.get() - '0');
    if (v > 100000) t.fail("repetition count over 100000");
  }
  return int(v);
}

// ---------------------------------------------------------------- GBNF

class Gbnf {
 public:
  Gbnf(std::string_view s, GrammarBuilder& b) : t_(s, "GBNF"), r_{b, {}, {}, {}} {}

  int parse() {
    t_.skip(true, "#");
    if (t_.eof()) t_.fail("the grammar is empty");
    while (!t_.eof()) {
      const size_t at = t_.pos();
      const std::string name = t_.name();
      if (name.empty()) t_.fail(std::string("expected a rule name, got '") + t_.peek() + "'");
      t_.skip(false, "#");
      if (!t_.starts("::=")) t_.fail("expected '::=' after rule name '" + name + "'");
      t_.seek(t_.pos() + 3);
      if (r_.defined.count(name)) {
        t_.seek(at);
        t_.fail("rule '" + name + "' is defined twice");
      }
      r_.defined.insert(name);
      const int id = r_.id(name);
      ExprPtr body = alternatives(0);
      r_.b.define(id, *body);
      t_.skip(true, "#");
    }
    r_.check_defined(t_);
    if (!r_.defined.count("root")) t_.fail("no 'root' rule (the start rule)");
    return r_.ids["root"];
  }

 private:
  // Whether a new rule (`name ::=`) starts here.
  bool at_rule_start() {
    const size_t at = t_.pos();
    const std::string n = t_.name();
    t_.skip(false, "#");
    const bool yes = !n.empty() && t_.starts("::=");
    t_.seek(at);
    return yes;
  }

  ExprPtr alternatives(int depth) {
    if (depth > 100) t_.fail("groups nested deeper than 100");
    std::vector<ExprPtr> alts{sequence(depth)};
    while (t_.peek() == '|') {
      t_.get();
      alts.push_back(sequence(depth));
    }
    return alts.size() == 1 ? alts[0] : alt(std::move(alts));
  }

  ExprPtr sequence(int depth) {
    std::vector<ExprPtr> items;
    for (;;) {
      t_.skip(true, "#");
      if (t_.eof() || t_.peek() == '|' || t_.peek() == ')') break;
      if (depth == 0 && at_rule_start()) break;
      ExprPtr e = primary(depth);
      items.push_back(postfix(std::move(e)));
    }
    if (items.empty()) return empty_expr();
    return items.size() == 1 ? items[0] : seq(std::move(items));
  }

  ExprPtr primary(int depth) {
    const char c = t_.peek();
    if (c == '"') {
      t_.get();
      std::string bytes;
      while (t_.peek() != '"') {
        if (t_.eof() || t_.peek() == '\n') t_.fail("unterminated string literal");
        append_utf8(bytes, t_.codepoint("\"[]-/"));
      }
      t_.get();
      return bytes.empty() ? empty_expr() : lit(std::move(bytes));
    }
    if (c == '[') return char_class();
    if (c == '.') {
      t_.get();
      return chars(CodepointSet::all());
    }
    if (c == '(') {
      t_.get();
      if (t_.peek() == '=' || t_.peek() == '!') t_.fail("lookahead assertions '(=' / '(!' are not supported");
      ExprPtr inner = alternatives(depth + 1);
      t_.skip(true, "#");
      if (t_.peek() != ')') t_.fail("expected ')'");
      t_.get();
      return inner;
    }
    if (c == '<') t_.fail("token references (<...>) are not supported: write the text of the token");
    const size_t at = t_.pos();
    const std::string name = t_.name();
    if (name.empty()) t_.fail(std::string("unexpected '") + c + "'");
    r_.first_use.emplace(name, at);
    return call(r_.id(name));
  }

  ExprPtr char_class() {
    t_.get();  // [
    const bool negate = t_.peek() == '^';
    if (negate) t_.get();
    CodepointSet set;
    while (t_.peek() != ']') {
      if (t_.eof()) t_.fail("unterminated character class");
      const uint32_t lo = t_.codepoint("\"[]-^/");
      uint32_t hi = lo;
      if (t_.peek() == '-' && t_.peek(1) != ']') {
        t_.get();
        hi = t_.codepoint("\"[]-^/");
        if (hi < lo) t_.fail("character range out of order");
      }
      set.add(lo, hi);
    }
    t_.get();
    if (negate) set = set.complement();
    if (set.empty()) t_.fail("character class matches nothing");
    return chars(std::move(set));
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      const char c = t_.peek();
      if (simple_repeat(t_, e)) {
        continue;
      } else if (c == '{') {
        t_.get();
        t_.skip(false, "#");
        int lo = 0, hi = -1;
        if (t_.peek() != ',') lo = parse_count(t_);
        t_.skip(false, "#");
        if (t_.peek() == ',') {
          t_.get();
          t_.skip(false, "#");
          if (t_.peek() != '}') hi = parse_count(t_);
        } else {
          hi = lo;
        }
        t_.skip(false, "#");
        if (t_.peek() != '}') t_.fail("expected '}' closing a repetition");
        t_.get();
        if (hi >= 0 && hi < lo) t_.fail("repetition {m,n} with n < m");
        e = repeat(e, lo, hi);
      } else {
        return e;
      }
    }
  }

  Text t_;
  Rules r_;
};

// ---------------------------------------------------------------- Lark

// Lark's common terminals (lark/grammars/common.lark), as regexes.
const std::map<std::string, std::string>& lark_common() {
  static const std::map<std::string, std::string> m = {
      {"DIGIT", "[0-9]"},
      {"HEXDIGIT", "[a-fA-F0-9]"},
      {"INT", "[0-9]+"},
      {"SIGNED_INT", "[+-]?[0-9]+"},
      {"DECIMAL", "[0-9]+\\.[0-9]*|\\.[0-9]+"},
      {"FLOAT", "([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+"},
      {"NUMBER", "([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+([eE][+-]?[0-9]+)?"},
      {"SIGNED_NUMBER", "[+-]?(([0-9]+\\.[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?|[0-9]+([eE][+-]?[0-9]+)?)"},
      {"LCASE_LETTER", "[a-z]"},
      {"UCASE_LETTER", "[A-Z]"},
      {"LETTER", "[a-zA-Z]"},
      {"WORD", "[a-zA-Z]+"},
      {"CNAME", "[_a-zA-Z][_a-zA-Z0-9]*"},
      {"WS_INLINE", "[ \\t]+"},
      {"WS", "[ \\t\\f\\r\\n]+"},
      {"CR", "\\r"},
      {"LF", "\\n"},
      {"NEWLINE", "(\\r?\\n)+"},
      {"ESCAPED_STRING", "\"([^\"\\\\]|\\\\.)*\""},
  };
  return m;
}

class Lark {
 public:
  Lark(std::string_view s, GrammarBuilder& b) : t_(s, "Lark"), r_{b, {}, {}, {}} {}

  int parse() {
    // First pass: directives and definitions in order; bodies are parsed once the ignored
    // terminals are known (%ignore may come last).
    struct Def {
      std::string name;
      size_t body_at;
    };
    std::vector<Def> defs;
    for (;;) {
      t_.skip(true, "//");
      if (t_.eof()) break;
      if (t_.peek() == '%') {
        directive();
        continue;
      }
      if (t_.peek() == '?' || t_.peek() == '!') t_.get();  // inline / keep-tokens modifiers
      const size_t at = t_.pos();
      std::string name = t_.name();
      if (name.empty()) t_.fail(std::string("expected a rule or terminal name, got '") + t_.peek() + "'");
      if (t_.peek() == '.') {  // TERM.priority
        t_.get();
        (void)parse_count(t_);
      }
      if (t_.peek() == '{') t_.fail("templates (rule{...}) are not supported");
      t_.skip(false, "//");
      if (t_.peek() != ':') t_.fail("expected ':' after '" + name + "'");
      t_.get();
      if (r_.defined.count(name) || (lark_common().count(name) && imported_.count(name))) {
        t_.seek(at);
        t_.fail("'" + name + "' is defined twice");
      }
      r_.defined.insert(name);
      defs.push_back({name, t_.pos()});
      skip_body();
    }
    for (const auto& name : ignore_)
      if (!r_.defined.count(name)) t_.fail("%ignore names '" + name + "', which is not defined or imported");
    if (!ignore_.empty()) {
      std::vector<ExprPtr> alts;
      for (const auto& name : ignore_) alts.push_back(call(r_.id(name)));
      ignore_expr_ = star(alts.size() == 1 ? alts[0] : alt(std::move(alts)));
    }
    for (const auto& d : defs) {
      t_.seek(d.body_at);
      terminal_ = std::isupper(static_cast<unsigned char>(d.name[0])) != 0;
      ExprPtr body = alternatives(0);
      if (d.name == "start" && ignore_expr_) body = seq({ignore_expr_, body, ignore_expr_});
      r_.b.define(r_.id(d.name), *body);
    }
    t_.seek(0);
    r_.check_defined(t_);
    if (!r_.defined.count("start")) t_.fail("no 'start' rule");
    return r_.ids["start"];
  }

 private:
  void directive() {
    t_.get();
    const std::string d = t_.name();
    t_.skip(false, "//");
    if (d == "import") {
      const std::string module = t_.name();
      if (module != "common" || t_.peek() != '.') t_.fail("only '%import common.NAME' is supported");
      t_.get();
      const std::string name = t_.name();
      auto it = lark_common().find(name);
      if (it == lark_common().end()) t_.fail("'common." + name + "' is not one of the supported common terminals");
      if (!r_.defined.insert(name).second) t_.fail("'" + name + "' is defined twice");
      imported_.insert(name);
      r_.b.define(r_.id(name), *regex_expr(it->second));
    } else if (d == "ignore") {
      const std::string name = t_.name();
      if (name.empty()) t_.fail("%ignore needs a terminal name (write the pattern as a terminal first)");
      ignore_.push_back(name);
    } else {
      t_.fail("directive %" + d + " is not supported");
    }
    t_.skip(false, "//");
    if (!t_.eof() && t_.peek() != '\n') t_.fail("unexpected text after %" + d);
  }

  // Skips a definition's body: to the end of its line and every following line that
  // continues it (starts with `|`).
  void skip_body() {
    for (;;) {
      while (!t_.eof() && t_.peek() != '\n') {
        if (t_.peek() == '"' || t_.peek() == '/') {  // a literal or regex may hold '//' or '\n' escapes
          const char q = t_.get();
          while (!t_.eof() && t_.peek() != q && t_.peek() != '\n') {
            if (t_.get() == '\\' && !t_.eof()) t_.get();
          }
          if (!t_.eof() && t_.peek() == q) t_.get();
        } else {
          t_.get();
        }
      }
      const size_t at = t_.pos();
      t_.skip(true, "//");
      if (t_.peek() != '|') {
        t_.seek(at);
        return;
      }
    }
  }

  void skip_inline() { t_.skip(false, "//"); }
  // Inside a body a newline ends it unless the next line continues with `|`.
  bool continues_with_bar() {
    const size_t at = t_.pos();
    t_.skip(true, "//");
    if (t_.peek() == '|') return true;
    t_.seek(at);
    return false;
  }

  ExprPtr alternatives(int depth) {
    if (depth > 100) t_.fail("groups nested deeper than 100");
    std::vector<ExprPtr> alts{sequence(depth)};
    for (;;) {
      if (depth == 0 ? continues_with_bar() : (t_.skip(true, "//"), t_.peek() == '|')) {
        t_.get();
        alts.push_back(sequence(depth));
      } else {
        break;
      }
    }
    return alts.size() == 1 ? alts[0] : alt(std::move(alts));
  }

  ExprPtr sequence(int depth) {
    std::vector<ExprPtr> items;
    for (;;) {
      if (depth == 0) skip_inline();
      else t_.skip(true, "//");
      const char c = t_.peek();
      if (t_.eof() || c == '\n' || c == '|' || c == ')' || c == ']') break;
      if (c == '-' && t_.peek(1) == '>') t_.fail("aliases (-> name) are not supported");
      ExprPtr e = postfix(primary(depth));
      // Lark's lexer skips ignored terminals between the tokens of a rule (not inside a
      // terminal).
      if (!items.empty() && ignore_expr_ && !terminal_) items.push_back(ignore_expr_);
      items.push_back(std::move(e));
    }
    if (items.empty()) return empty_expr();
    return items.size() == 1 ? items[0] : seq(std::move(items));
  }

  ExprPtr literal() {
    t_.get();
    std::string bytes;
    std::vector<uint32_t> cps;
    while (t_.peek() != '"') {
      if (t_.eof() || t_.peek() == '\n') t_.fail("unterminated string literal");
      cps.push_back(t_.codepoint("\"'/"));
    }
    t_.get();
    if (t_.peek() == '.' && t_.peek(1) == '.') {  // "a".."z"
      t_.seek(t_.pos() + 2);
      if (t_.peek() != '"') t_.fail("expected a one-character literal after '..'");
      t_.get();
      const uint32_t hi = t_.codepoint("\"'/");
      if (t_.peek() != '"') t_.fail("a range bound must be one character");
      t_.get();
      if (cps.size() != 1 || hi < cps[0]) t_.fail("bad character range");
      return chars(CodepointSet::range(cps[0], hi));
    }
    const bool icase = t_.peek() == 'i' && !std::isalnum(static_cast<unsigned char>(t_.peek(1)));
    if (icase) t_.get();
    if (!icase) {
      for (uint32_t c : cps) append_utf8(bytes, c);
      return bytes.empty() ? empty_expr() : lit(std::move(bytes));
    }
    std::vector<ExprPtr> parts;
    for (uint32_t c : cps) {
      CodepointSet s = CodepointSet::single(c);
      if (c < 128 && std::isalpha(int(c))) {
        s.add(uint32_t(std::tolower(int(c))), uint32_t(std::tolower(int(c))));
        s.add(uint32_t(std::toupper(int(c))), uint32_t(std::toupper(int(c))));
      }
      parts.push_back(chars(std::move(s)));
    }
    return parts.empty() ? empty_expr() : seq(std::move(parts));
  }

  ExprPtr regex() {
    t_.get();
    std::string pattern;
    while (t_.peek() != '/') {
      if (t_.eof() || t_.peek() == '\n') t_.fail("unterminated /regex/");
      const char c = t_.get();
      if (c == '\\' && t_.peek() == '/') {
        pattern += t_.get();
        continue;
      }
      pattern += c;
      if (c == '\\' && !t_.eof()) pattern += t_.get();
    }
    t_.get();
    if (std::isalpha(static_cast<unsigned char>(t_.peek()))) t_.fail("regex flags (/.../" + std::string(1, t_.peek()) + ") are not supported");
    try {
      return regex_expr(pattern);
    } catch (const ConstraintError& e) {
      t_.fail(e.what());
    }
  }

  ExprPtr primary(int depth) {
    const char c = t_.peek();
    if (c == '"') return literal();
    if (c == '/') return regex();
    if (c == '(' || c == '[') {
      t_.get();
      ExprPtr inner = alternatives(depth + 1);
      t_.skip(true, "//");
      const char close = c == '(' ? ')' : ']';
      if (t_.peek() != close) t_.fail(std::string("expected '") + close + "'");
      t_.get();
      return c == '[' ? opt(inner) : inner;  // [x]: optional
    }
    const size_t at = t_.pos();
    const std::string name = t_.name();
    if (name.empty()) t_.fail(std::string("unexpected '") + c + "'");
    if (terminal_ && !std::isupper(static_cast<unsigned char>(name[0])))
      t_.fail("terminal definitions may only use terminals, not rule '" + name + "'");
    r_.first_use.emplace(name, at);
    return call(r_.id(name));
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      const char c = t_.peek();
      if (simple_repeat(t_, e)) {
        continue;
      } else if (c == '~' || (c == ' ' && t_.peek(1) == '~')) {
        t_.skip(false, "//");
        t_.get();
        t_.skip(false, "//");
        const int lo = parse_count(t_);
        int hi = lo;
        if (t_.peek() == '.' && t_.peek(1) == '.') {
          t_.seek(t_.pos() + 2);
          hi = parse_count(t_);
        }
        if (hi < lo) t_.fail("repetition ~ n..m with m < n");
        e = repeat(e, lo, hi);
      } else {
        return e;
      }
    }
  }

  Text t_;
  Rules r_;
  std::set<std::string> imported_;
  std::vector<std::string> ignore_;
  ExprPtr ignore_expr_;
  bool terminal_ = false;
};

}  // namespace

Grammar gbnf_grammar(std::string_view text, size_t max_states) {
  GrammarBuilder b(max_states);
  Gbnf p(text, b);
  const int root = p.parse();
  return b.finish(root);
}

Grammar lark_grammar(std::string_view text, size_t max_states) {
  GrammarBuilder b(max_states);
  Lark p(text, b);
  const int start = p.parse();
  return b.finish(start);
}

bool looks_like_gbnf(std::string_view text) { return text.find("::=") != std::string_view::npos; }

Grammar text_grammar(std::string_view text, size_t max_states) {
  return looks_like_gbnf(text) ? gbnf_grammar(text, max_states) : lark_grammar(text, max_states);
}

}  // namespace nanovllm::structured
