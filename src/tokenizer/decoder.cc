#include "tokenizer/decoder.h"

#include "tokenizer/normalizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"
#include "util/check.h"

namespace nanovllm {

bool parse_byte_token(std::string_view t, unsigned char* byte) {
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return false;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int h = hex(t[3]), l = hex(t[4]);
  if (h < 0 || l < 0) return false;
  *byte = static_cast<unsigned char>(h * 16 + l);
  return true;
}

namespace {

// Byte-level: every char of a token maps back to one byte (a token holding a char outside the
// alphabet, e.g. an added token, contributes its raw UTF-8); the bytes of all tokens are then
// read as UTF-8 with U+FFFD replacement.
class ByteLevelDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (auto& t : tokens) {
      size_t start = bytes.size();
      bool ok = true;
      for (size_t i = 0; i < t.size();) {
        int b = utf8::unicode_to_byte(utf8::next_cp(t, i));
        if (b < 0) {
          ok = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      if (!ok) {
        bytes.resize(start);
        bytes += t;
      }
    }
    tokens.assign(1, utf8::sanitize(bytes));
  }
};

// Runs of "<0xAB>" tokens become their bytes when those form valid UTF-8, else one U+FFFD per
// byte (HF semantics).
class ByteFallbackDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string run;
    size_t run_len = 0;
    auto flush = [&] {
      if (!run_len) return;
      if (utf8::is_valid(run)) {
        out.push_back(run);
      } else {
        for (size_t k = 0; k < run_len; ++k) out.emplace_back(utf8::kReplacement);
      }
      run.clear();
      run_len = 0;
    };
    for (auto& t : tokens) {
      unsigned char b;
      if (parse_byte_token(t, &b)) {
        run.push_back(static_cast<char>(b));
        ++run_len;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }
  bool uses_byte_fallback() const override { return true; }
};

class FuseDec : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class StripDec : public Decoder {
 public:
  StripDec(std::string content, int start, int stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    size_t w = content_.size();
    for (auto& t : tokens) {
      size_t b = 0, e = t.size();
      for (int k = 0; k < start_ && b + w <= e && t.compare(b, w, content_) == 0; ++k) b += w;
      for (int k = 0; k < stop_ && e >= b + w && t.compare(e - w, w, content_) == 0; ++k) e -= w;
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  int start_, stop_;
};

class ReplaceDec : public Decoder {
 public:
  ReplaceDec(const nlohmann::json& pattern, std::string content) : content_(std::move(content)) {
    if (pattern.contains("String")) {
      literal_ = pattern["String"].get<std::string>();
    } else if (pattern.contains("Regex")) {
      regex_ = std::make_unique<Regex>(pattern["Regex"].get<std::string>());
    } else {
      NV_THROW("tokenizer: Replace decoder pattern must be {String} or {Regex}: ", pattern.dump());
    }
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      if (!regex_) {
        t = replace_all(t, literal_, content_);
        continue;
      }
      std::string out;
      size_t pos = 0;
      for (auto [b, e] : regex_->find_all(t)) {
        out.append(t, pos, b - pos);
        out += content_;
        pos = e;
      }
      out.append(t, pos, std::string::npos);
      t.swap(out);
    }
  }

 private:
  std::string literal_, content_;
  std::unique_ptr<Regex> regex_;
};

// The replacement char becomes a space; the first token loses a leading one unless the
// prepend scheme is "never".
class MetaspaceDec : public Decoder {
 public:
  explicit MetaspaceDec(const nlohmann::json& j) {
    replacement_ = j.value("replacement", std::string("\xE2\x96\x81"));
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string())
      strip_first_ = j["prepend_scheme"].get<std::string>() != "never";
    else if (j.contains("add_prefix_space"))
      strip_first_ = j["add_prefix_space"].get<bool>();
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string t = replace_all(tokens[i], replacement_, " ");
      if (i == 0 && strip_first_ && !t.empty() && t[0] == ' ') t.erase(0, 1);
      tokens[i].swap(t);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_ = true;
};

class SequenceDec : public Decoder {
 public:
  explicit SequenceDec(std::vector<std::unique_ptr<Decoder>> v) : items_(std::move(v)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& d : items_) d->decode_chain(tokens);
  }
  bool uses_byte_fallback() const override {
    for (auto& d : items_)
      if (d->uses_byte_fallback()) return true;
    return false;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> items_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  NV_CHECK(j.is_object() && j.contains("type"), "tokenizer: decoder without a type: ", j.dump());
  std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return std::make_unique<ByteLevelDec>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDec>();
  if (type == "Fuse") return std::make_unique<FuseDec>();
  if (type == "Strip")
    return std::make_unique<StripDec>(j.at("content").get<std::string>(), j.value("start", 0),
                                      j.value("stop", 0));
  if (type == "Replace") return std::make_unique<ReplaceDec>(j.at("pattern"), j.at("content").get<std::string>());
  if (type == "Metaspace") return std::make_unique<MetaspaceDec>(j);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> v;
    for (auto& d : j.at("decoders"))
      if (auto p = make_decoder(d)) v.push_back(std::move(p));
    return std::make_unique<SequenceDec>(std::move(v));
  }
  NV_THROW("tokenizer: unsupported decoder type '", type, "'");
}

}  // namespace nanovllm
