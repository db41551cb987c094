#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"
#include "util/check.h"

namespace nanovllm {

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(s);
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.data() + pos, hit - pos);
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.data() + pos, s.size() - pos);
  return out;
}

namespace {

// True when NFC leaves s unchanged because every code point is "stable": no canonical
// decomposition, combining class 0, and never the second half of a composition (which
// utf8proc marks with comb_index >= 0x8000; Hangul jamo compose algorithmically and are
// excluded by range). Most text (ASCII, CJK, most scripts) passes, skipping utf8proc_map.
bool nfc_stable(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp = utf8::next_cp(s, i);
    if (cp < 0x300) continue;  // Latin-1 / Latin Extended: all stable
    if (cp >= 0x1100 && cp <= 0x11FF) return false;
    const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
    if (p->combining_class != 0) return false;
    if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0) return false;  // canonical
    if (p->comb_index != UINT16_MAX && p->comb_index >= 0x8000) return false;
  }
  return true;
}

// Unicode normalization forms through utf8proc.
class UnicodeNorm : public Normalizer {
 public:
  UnicodeNorm(int options, bool compose) : options_(options), compose_(compose) {}
  void normalize(std::string& s) const override {
    if (compose_ && !(options_ & UTF8PROC_COMPAT) && nfc_stable(s)) return;
    if (!compose_ || (options_ & UTF8PROC_COMPAT)) {
      bool ascii = true;  // ASCII is invariant under every normalization form
      for (unsigned char c : s) ascii = ascii && c < 0x80;
      if (ascii) return;
    }
    utf8proc_uint8_t* dst = nullptr;
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                      static_cast<utf8proc_ssize_t>(s.size()), &dst,
                                      static_cast<utf8proc_option_t>(options_));
    if (n < 0) {
      std::free(dst);
      NV_THROW("tokenizer: unicode normalization failed: ", utf8proc_errmsg(n));
    }
    s.assign(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
    std::free(dst);
  }

 private:
  int options_;
  bool compose_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      uint32_t cp = utf8::next_cp(s, i);
      utf8::append_cp(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    }
    s.swap(out);
  }
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string p) : prefix_(std::move(p)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prefix_);  // HF prepends only to non-empty text
  }

 private:
  std::string prefix_;
};

class Replace : public Normalizer {
 public:
  Replace(const nlohmann::json& pattern, std::string content) : content_(std::move(content)) {
    if (pattern.contains("String")) {
      literal_ = pattern["String"].get<std::string>();
    } else if (pattern.contains("Regex")) {
      regex_ = std::make_unique<Regex>(pattern["Regex"].get<std::string>());
    } else {
      NV_THROW("tokenizer: Replace pattern must be {String} or {Regex}: ", pattern.dump());
    }
  }
  void normalize(std::string& s) const override {
    if (!regex_) {
      s = replace_all(s, literal_, content_);
      return;
    }
    std::string out;
    size_t pos = 0;
    for (auto [b, e] : regex_->find_all(s)) {
      out.append(s, pos, b - pos);
      out.append(content_);
      pos = e;
    }
    out.append(s, pos, std::string::npos);
    s.swap(out);
  }

 private:
  std::string literal_, content_;
  std::unique_ptr<Regex> regex_;
};

class StripWs : public Normalizer {
 public:
  StripWs(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& s) const override {
    auto is_ws = [](uint32_t cp) {
      auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
      return (cp >= 9 && cp <= 13) || cp == 0x85 || cat == UTF8PROC_CATEGORY_ZS ||
             cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
    };
    size_t b = 0, e = s.size();
    if (left_) {
      while (b < e) {
        size_t i = b;
        if (!is_ws(utf8::next_cp(s, i))) break;
        b = i;
      }
    }
    if (right_) {
      while (e > b) {
        size_t i = e - 1;
        while (i > b && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
        size_t j = i;
        if (!is_ws(utf8::next_cp(s, j))) break;
        e = i;
      }
    }
    s = s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class SequenceNorm : public Normalizer {
 public:
  explicit SequenceNorm(std::vector<std::unique_ptr<Normalizer>> v) : items_(std::move(v)) {}
  void normalize(std::string& s) const override {
    for (auto& n : items_) n->normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  NV_CHECK(j.is_object() && j.contains("type"), "tokenizer: normalizer without a type: ", j.dump());
  std::string type = j["type"].get<std::string>();
  if (type == "NFC") return std::make_unique<UnicodeNorm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE, true);
  if (type == "NFD") return std::make_unique<UnicodeNorm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, false);
  if (type == "NFKC")
    return std::make_unique<UnicodeNorm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT, true);
  if (type == "NFKD")
    return std::make_unique<UnicodeNorm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, false);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Prepend") return std::make_unique<Prepend>(j.at("prepend").get<std::string>());
  if (type == "Replace") return std::make_unique<Replace>(j.at("pattern"), j.at("content").get<std::string>());
  if (type == "Strip")
    return std::make_unique<StripWs>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> v;
    for (auto& n : j.at("normalizers"))
      if (auto p = make_normalizer(n)) v.push_back(std::move(p));
    return std::make_unique<SequenceNorm>(std::move(v));
  }
  NV_THROW("tokenizer: unsupported normalizer type '", type, "'");
}

}  // namespace nanovllm
