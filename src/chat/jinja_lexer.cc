// Jinja lexer (see jinja_lexer.h). Mirrors the order of jinja2's tokenizer: the whitespace
// of a text chunk is decided by the tag that ends it ({%- rstrip, or lstrip_blocks) and by the
// tag before it (-%} strips all, %} drops one newline under trim_blocks).
#include "chat/jinja_lexer.h"

#include <cctype>
#include <cstring>

#include "util/check.h"

namespace nanovllm::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string rstrip_ws(const std::string& s) {
  size_t e = s.size();
  while (e > 0 && is_space(s[e - 1])) --e;
  return s.substr(0, e);
}

struct Lexer {
  std::string src;
  size_t pos = 0;
  int line = 1;
  std::vector<Token> out;
  bool line_starting = true;  // previous token ended with '\n' (jinja2's lstrip_blocks rule)

  [[noreturn]] void fail(const std::string& msg) {
    throw Error("chat template syntax error at line " + std::to_string(line) + ": " + msg);
  }

  void advance_to(size_t p) {
    for (size_t i = pos; i < p && i < src.size(); ++i)
      if (src[i] == '\n') ++line;
    pos = p;
  }

  void push(Tok t, std::string text = {}) { out.push_back(Token{t, std::move(text), 0, 0, line}); }

  // Consumes whitespace after a tag end according to its marker ('-' all, trim_blocks one '\n').
  void after_tag_end(char marker) {
    size_t p = pos;
    if (marker == '-') {
      while (p < src.size() && is_space(src[p])) ++p;
    } else if (marker != '+' && p < src.size() && src[p] == '\n') {
      ++p;
    }
    line_starting = p > pos ? src[p - 1] == '\n' : false;
    advance_to(p);
  }

  // Emits the text before a tag; `kind` is the tag's second char ('{', '%', '#') or 0 at EOF,
  // `marker` the char after it ('-', '+' or other).
  void emit_text(std::string text, char kind, char marker) {
    if (kind && marker == '-') {
      text = rstrip_ws(text);
    } else if ((kind == '%' || kind == '#') && marker != '+') {
      size_t l_pos = text.rfind('\n');
      l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
      if (l_pos > 0 || line_starting) {
        bool all_ws = l_pos < text.size();
        for (size_t i = l_pos; i < text.size(); ++i)
          if (!is_space(text[i])) all_ws = false;
        if (all_ws) text.resize(l_pos);
      }
    }
    if (!text.empty()) push(Tok::Text, std::move(text));
  }

  void lex_string() {
    char q = src[pos];
    std::string s;
    size_t p = pos + 1;
    for (;;) {
      if (p >= src.size()) fail("unterminated string literal");
      char c = src[p];
      if (c == q) break;
      if (c == '\\' && p + 1 < src.size()) {
        char e = src[p + 1];
        p += 2;
        switch (e) {
          case 'n': s += '\n'; break;
          case 't': s += '\t'; break;
          case 'r': s += '\r'; break;
          case '0': s += '\0'; break;
          case 'b': s += '\b'; break;
          case 'f': s += '\f'; break;
          case 'v': s += '\v'; break;
          case 'a': s += '\a'; break;
          case '\\': s += '\\'; break;
          case '\'': s += '\''; break;
          case '"': s += '"'; break;
          case '\n': break;  // line continuation
          case 'x':
          case 'u':
          case 'U': {
            int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int k = 0; k < n; ++k) {
              char h = p + k < src.size() ? src[p + k] : '\0';
              if (!std::isxdigit((unsigned char)h)) fail("truncated \\" + std::string(1, e) + " escape");
              cp = cp * 16 + uint32_t(std::isdigit((unsigned char)h) ? h - '0' : (std::tolower(h) - 'a' + 10));
            }
            if (cp > 0x10FFFF) fail("illegal Unicode character in \\U escape");
            p += n;
            // Encode the code point as UTF-8.
            if (cp < 0x80) {
              s += char(cp);
            } else if (cp < 0x800) {
              s += char(0xC0 | (cp >> 6));
              s += char(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
              s += char(0xE0 | (cp >> 12));
              s += char(0x80 | ((cp >> 6) & 0x3F));
              s += char(0x80 | (cp & 0x3F));
            } else {
              s += char(0xF0 | (cp >> 18));
              s += char(0x80 | ((cp >> 12) & 0x3F));
              s += char(0x80 | ((cp >> 6) & 0x3F));
              s += char(0x80 | (cp & 0x3F));
            }
            break;
          }
          default:  // Python keeps unknown escapes verbatim
            s += '\\';
            s += e;
        }
        continue;
      }
      s += c;
      ++p;
    }
    push(Tok::String, std::move(s));
    advance_to(p + 1);
  }

  void lex_number() {
    size_t p = pos;
    auto digits = [&] {
      while (p < src.size() && (std::isdigit((unsigned char)src[p]) || src[p] == '_')) ++p;
    };
    digits();
    bool is_float = false;
    if (p + 1 < src.size() && src[p] == '.' && std::isdigit((unsigned char)src[p + 1])) {
      is_float = true;
      ++p;
      digits();
    }
    if (p < src.size() && (src[p] == 'e' || src[p] == 'E')) {
      size_t q = p + 1;
      if (q < src.size() && (src[q] == '+' || src[q] == '-')) ++q;
      if (q < src.size() && std::isdigit((unsigned char)src[q])) {
        is_float = true;
        p = q;
        digits();
      }
    }
    std::string t;
    for (size_t i = pos; i < p; ++i)
      if (src[i] != '_') t += src[i];
    Token tok{is_float ? Tok::Float : Tok::Int, t, 0, 0, line};
    try {
      if (is_float) tok.fval = std::stod(t);
      else tok.ival = std::stoll(t);
    } catch (const std::exception&) {
      fail("number out of range: " + t);
    }
    out.push_back(tok);
    advance_to(p);
  }

  // Lexes the inside of a {{ }} or {% %} tag up to and including its end marker.
  void lex_tag(bool is_var) {
    int depth = 0;  // brackets opened inside the tag: `}}` inside a dict literal is not the end
    for (;;) {
      while (pos < src.size() && is_space(src[pos])) advance_to(pos + 1);
      if (pos >= src.size()) fail(std::string("unexpected end of template, missing '") + (is_var ? "}}" : "%}") + "'");
      const char* end = is_var ? "}}" : "%}";
      if (depth == 0) {
        char m = src[pos];
        if ((m == '-' || (m == '+' && !is_var)) && src.compare(pos + 1, 2, end) == 0) {
          push(is_var ? Tok::VarEnd : Tok::BlockEnd);
          advance_to(pos + 3);
          after_tag_end(is_var && m == '+' ? 0 : m);
          return;
        }
        if (src.compare(pos, 2, end) == 0) {
          push(is_var ? Tok::VarEnd : Tok::BlockEnd);
          advance_to(pos + 2);
          after_tag_end(is_var ? '+' : 0);
          return;
        }
      }
      char c = src[pos];
      if (c == '\'' || c == '"') {
        lex_string();
      } else if (std::isdigit((unsigned char)c)) {
        lex_number();
      } else if (std::isalpha((unsigned char)c) || c == '_') {
        size_t p = pos;
        while (p < src.size() && (std::isalnum((unsigned char)src[p]) || src[p] == '_')) ++p;
        push(Tok::Name, src.substr(pos, p - pos));
        advance_to(p);
      } else {
        static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* t : two)
          if (src.compare(pos, 2, t) == 0) op = t;
        if (op.empty()) {
          if (!std::strchr("+-*/%~<>=()[]{},.:|", c)) fail(std::string("unexpected character '") + c + "'");
          op = std::string(1, c);
          if (c == '(' || c == '[' || c == '{') ++depth;
          if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        }
        push(Tok::Op, op);
        advance_to(pos + op.size());
      }
    }
  }

  // {% raw %}...{% endraw %}: body is literal text. `pos` is just after the raw tag's end.
  bool try_raw(size_t tag_start) {
    size_t p = tag_start + 2;
    if (p < src.size() && (src[p] == '-' || src[p] == '+')) ++p;
    while (p < src.size() && is_space(src[p])) ++p;
    if (src.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src.size() && is_space(src[p])) ++p;
    char end_marker = 0;
    if (p < src.size() && (src[p] == '-' || src[p] == '+')) end_marker = src[p++];
    if (src.compare(p, 2, "%}") != 0) return false;
    advance_to(p + 2);
    after_tag_end(end_marker);
    // Find {%-? endraw -?%}
    size_t q = pos;
    for (;;) {
      q = src.find("{%", q);
      if (q == std::string::npos) fail("missing {% endraw %}");
      size_t r = q + 2;
      char start_marker = 0;
      if (r < src.size() && (src[r] == '-' || src[r] == '+')) start_marker = src[r++];
      while (r < src.size() && is_space(src[r])) ++r;
      if (src.compare(r, 6, "endraw") == 0) {
        r += 6;
        while (r < src.size() && is_space(src[r])) ++r;
        char em = 0;
        if (r < src.size() && (src[r] == '-' || src[r] == '+')) em = src[r++];
        if (src.compare(r, 2, "%}") == 0) {
          std::string body = src.substr(pos, q - pos);
          if (start_marker == '-') body = rstrip_ws(body);
          if (!body.empty()) push(Tok::Text, body);
          advance_to(r + 2);
          after_tag_end(em);
          return true;
        }
      }
      q += 2;
    }
  }

  void run() {
    while (pos < src.size()) {
      size_t p = pos;
      size_t tag = std::string::npos;
      while ((p = src.find('{', p)) != std::string::npos) {
        if (p + 1 < src.size() && (src[p + 1] == '{' || src[p + 1] == '%' || src[p + 1] == '#')) {
          tag = p;
          break;
        }
        ++p;
      }
      std::string text = src.substr(pos, tag == std::string::npos ? std::string::npos : tag - pos);
      if (tag == std::string::npos) {
        emit_text(std::move(text), 0, 0);
        advance_to(src.size());
        break;
      }
      char kind = src[tag + 1];
      char marker = tag + 2 < src.size() ? src[tag + 2] : 0;
      emit_text(std::move(text), kind, marker);
      advance_to(tag);
      if (kind == '#') {
        size_t e = src.find("#}", tag + 2);
        if (e == std::string::npos) fail("unterminated comment");
        char em = src[e - 1] == '-' || src[e - 1] == '+' ? src[e - 1] : 0;
        if (e - 1 < tag + 2) em = 0;  // "{#-#}": the '-' belongs to the start
        advance_to(e + 2);
        after_tag_end(em);
        continue;
      }
      if (kind == '%' && try_raw(tag)) continue;
      size_t body = tag + 2 + ((marker == '-' || marker == '+') ? 1 : 0);
      push(kind == '{' ? Tok::VarBegin : Tok::BlockBegin);
      advance_to(body);
      lex_tag(kind == '{');
    }
    push(Tok::Eof);
  }
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) {
  Lexer lx;
  // jinja2 normalizes newlines to '\n' and drops one trailing newline (keep_trailing_newline=False).
  lx.src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      lx.src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      lx.src += source[i];
    }
  }
  if (!lx.src.empty() && lx.src.back() == '\n') lx.src.pop_back();
  lx.run();
  return std::move(lx.out);
}

}  // namespace nanovllm::jinja
