#include "tokenizer/tokenizer_json.h"

#include <charconv>
#include <cstdlib>

#include "tokenizer/utf8.h"
#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  TokenizerJson parse_document() {
    TokenizerJson out;
    out.arena.reserve(s_.size() / 2);
    ws();
    if (peek() == '{') {
      out.doc = parse_object(0, &out);
    } else {
      out.doc = parse_value(1, nullptr);
    }
    ws();
    if (pos_ != s_.size()) fail("trailing characters");
    return out;
  }

 private:
  [[noreturn]] void fail(const char* what) {
    NV_THROW("tokenizer.json: invalid JSON at byte ", pos_, ": ", what);
  }
  char peek() { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t'))
      ++pos_;
  }
  void expect(char c) {
    ws();
    if (peek() != c) {
      char msg[32] = "expected 'x'";
      msg[10] = c;
      fail(msg);
    }
    ++pos_;
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else fail("bad \\u escape");
    }
    return v;
  }

  void parse_string(std::string& out) {
    out.clear();
    ws();
    if (peek() != '"') fail("expected string");
    ++pos_;
    while (true) {
      // Copy the run up to the next quote or backslash in one go.
      size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] != '"' && s_[pos_] != '\\') ++pos_;
      out.append(s_.data() + start, pos_ - start);
      if (pos_ >= s_.size()) fail("unterminated string");
      if (s_[pos_] == '"') {
        ++pos_;
        return;
      }
      ++pos_;  // backslash
      if (pos_ >= s_.size()) fail("unterminated escape");
      char c = s_[pos_++];
      switch (c) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF && pos_ + 6 <= s_.size() && s_[pos_] == '\\' && s_[pos_ + 1] == 'u') {
            size_t save = pos_;
            pos_ += 2;
            unsigned lo = hex4();
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              pos_ = save;
            }
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // lone surrogate
          utf8::append_cp(out, cp);
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  nlohmann::json parse_number() {
    size_t start = pos_;
    if (peek() == '-') ++pos_;
    bool is_float = false;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        is_float = true;
        ++pos_;
      } else {
        break;
      }
    }
    if (pos_ == start) fail("expected a value");
    const char* b = s_.data() + start;
    const char* e = s_.data() + pos_;
    if (!is_float) {
      int64_t v;
      auto r = std::from_chars(b, e, v);
      if (r.ec == std::errc() && r.ptr == e) return v;
      uint64_t u;
      r = std::from_chars(b, e, u);
      if (r.ec == std::errc() && r.ptr == e) return u;
    }
    std::string tmp(b, e);
    char* endp = nullptr;
    double d = std::strtod(tmp.c_str(), &endp);
    if (endp != tmp.c_str() + tmp.size()) fail("bad number");
    return d;
  }

  bool literal(std::string_view w) {
    if (s_.substr(pos_, w.size()) == w) {
      pos_ += w.size();
      return true;
    }
    return false;
  }

  // depth: 0 = the top-level object, 1 = inside "model" (where vocab/merges are intercepted).
  nlohmann::json parse_value(int depth, TokenizerJson* tj) {
    ws();
    if (++nesting_ > kJsonMaxDepth) fail("nesting deeper than kJsonMaxDepth (512) levels");
    nlohmann::json v;
    char c = peek();
    if (c == '{') {
      v = parse_object(depth, tj);
    } else if (c == '[') {
      ++pos_;
      v = nlohmann::json::array();
      ws();
      if (peek() == ']') {
        ++pos_;
      } else {
        while (true) {
          v.push_back(parse_value(2, nullptr));
          ws();
          if (peek() == ',') {
            ++pos_;
            continue;
          }
          expect(']');
          break;
        }
      }
    } else if (c == '"') {
      std::string str;
      parse_string(str);
      v = std::move(str);
    } else if (literal("true")) {
      v = true;
    } else if (literal("false")) {
      v = false;
    } else if (literal("null")) {
      v = nullptr;
    } else {
      v = parse_number();
    }
    --nesting_;
    return v;
  }

  nlohmann::json parse_object(int depth, TokenizerJson* tj) {
    expect('{');
    nlohmann::json obj = nlohmann::json::object();
    ws();
    if (peek() == '}') {
      ++pos_;
      return obj;
    }
    std::string key;
    while (true) {
      parse_string(key);
      expect(':');
      ws();
      if (depth == 0 && key == "model" && peek() == '{') {
        obj[key] = parse_object(1, tj);
      } else if (depth == 1 && tj && key == "vocab" && peek() == '{') {
        parse_vocab(tj);
      } else if (depth == 1 && tj && key == "merges" && peek() == '[') {
        parse_merges(tj);
      } else {
        obj[key] = parse_value(2, nullptr);
      }
      ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return obj;
    }
  }

  // Parses a string into the arena.
  ArenaStr arena_string(TokenizerJson* tj) {
    parse_string(scratch_);
    if (tj->arena.size() + scratch_.size() > UINT32_MAX) fail("tokenizer.json too large");
    ArenaStr a{static_cast<uint32_t>(tj->arena.size()), static_cast<uint32_t>(scratch_.size())};
    tj->arena += scratch_;
    return a;
  }

  void parse_vocab(TokenizerJson* tj) {
    tj->has_vocab = true;
    expect('{');
    ws();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    while (true) {
      ArenaStr k = arena_string(tj);
      expect(':');
      ws();
      int64_t id;
      const char* b = s_.data() + pos_;
      auto r = std::from_chars(b, s_.data() + s_.size(), id);
      if (r.ec != std::errc() || id < 0 || id > INT32_MAX) fail("vocab ids must be non-negative integers");
      pos_ += r.ptr - b;
      tj->vocab.emplace_back(k, static_cast<int>(id));
      ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return;
    }
  }

  void parse_merges(TokenizerJson* tj) {
    tj->has_merges = true;
    expect('[');
    ws();
    if (peek() == ']') {
      ++pos_;
      return;
    }
    while (true) {
      ws();
      if (peek() == '"') {  // "a b"
        ArenaStr ab = arena_string(tj);
        size_t sp = tj->str(ab).find(' ');
        if (sp == std::string::npos) fail("merge string without a space");
        uint32_t l = static_cast<uint32_t>(sp);
        tj->merges.push_back({{ab.off, l}, {ab.off + l + 1, ab.len - l - 1}});
      } else {  // ["a", "b"]
        expect('[');
        ArenaStr a = arena_string(tj);
        expect(',');
        ArenaStr b = arena_string(tj);
        expect(']');
        tj->merges.push_back({a, b});
      }
      ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return;
    }
  }

  std::string_view s_;
  std::string scratch_;
  size_t pos_ = 0;
  size_t nesting_ = 0;
};

}  // namespace

TokenizerJson parse_tokenizer_json(std::string_view text) {
  return Parser(text).parse_document();
}

}  // namespace nanovllm
