#include "tokenizer/pre_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>

#include "tokenizer/normalizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"
#include "util/check.h"

namespace nanovllm {
namespace {

// The GPT-2 word regex that ByteLevel uses when use_regex is true.
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const std::string& b) {
  if (b == "Removed") return Behavior::Removed;
  if (b == "Isolated") return Behavior::Isolated;
  if (b == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::MergedWithNext;
  if (b == "Contiguous") return Behavior::Contiguous;
  NV_THROW("tokenizer: unknown split behavior '", b, "'");
}

struct Part {
  size_t b, e;
  bool is_match;
};

// Turns matches into a partition of [0, n) and applies the split behavior (HF semantics), then
// appends the non-empty parts of `src` to `out`.
void emit_parts(const PreToken& src, const std::vector<std::pair<size_t, size_t>>& matches,
                bool invert, Behavior behavior, std::vector<PreToken>& out) {
  const std::string& s = src.text;
  std::vector<Part> parts;
  size_t pos = 0;
  for (auto [b, e] : matches) {
    if (b > pos) parts.push_back({pos, b, invert});
    parts.push_back({b, e, !invert});
    pos = e;
  }
  if (pos < s.size()) parts.push_back({pos, s.size(), invert});

  std::vector<Part> res;
  res.reserve(parts.size());
  switch (behavior) {
    case Behavior::Isolated:
      res.swap(parts);
      break;
    case Behavior::Removed:
      for (auto& p : parts)
        if (!p.is_match) res.push_back(p);
      break;
    case Behavior::MergedWithPrevious: {
      bool prev = false;
      for (auto& p : parts) {
        if (p.is_match && !prev && !res.empty()) res.back().e = p.e;
        else res.push_back(p);
        prev = p.is_match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool prev = false;
      for (size_t k = parts.size(); k-- > 0;) {
        auto& p = parts[k];
        if (p.is_match && !prev && !res.empty()) res.back().b = p.b;
        else res.push_back(p);
        prev = p.is_match;
      }
      std::reverse(res.begin(), res.end());
      break;
    }
    case Behavior::Contiguous: {
      bool prev = false;
      for (auto& p : parts) {
        if (p.is_match == prev && !res.empty()) res.back().e = p.e;
        else res.push_back(p);
        prev = p.is_match;
      }
      break;
    }
  }
  for (auto& p : res)
    if (p.e > p.b) out.push_back({s.substr(p.b, p.e - p.b), src.at_start && p.b == 0});
}

class SplitPT : public PreTokenizer {
 public:
  SplitPT(const nlohmann::json& j) {
    auto& pat = j.at("pattern");
    if (pat.contains("Regex")) {
      regex_ = std::make_unique<Regex>(pat["Regex"].get<std::string>());
    } else if (pat.contains("String")) {
      regex_ = std::make_unique<Regex>(regex_escape(pat["String"].get<std::string>()));
    } else {
      NV_THROW("tokenizer: Split pattern must be {String} or {Regex}: ", pat.dump());
    }
    behavior_ = parse_behavior(j.at("behavior").get<std::string>());
    invert_ = j.value("invert", false);
  }
  void apply(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    out.reserve(pieces.size() * 4);
    for (auto& p : pieces) emit_parts(p, regex_->find_all(p.text), invert_, behavior_, out);
    pieces.swap(out);
  }

 private:
  std::unique_ptr<Regex> regex_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPT : public PreTokenizer {
 public:
  ByteLevelPT(const nlohmann::json& j)
      : add_prefix_space_(j.value("add_prefix_space", true)), use_regex_(j.value("use_regex", true)) {
    if (use_regex_) regex_ = std::make_unique<Regex>(kGpt2Regex);
  }
  void apply(std::vector<PreToken>& pieces) const override {
    if (add_prefix_space_)
      for (auto& p : pieces)
        if (p.text.empty() || p.text[0] != ' ') p.text = " " + p.text;
    if (use_regex_) {
      std::vector<PreToken> out;
      for (auto& p : pieces) emit_parts(p, regex_->find_all(p.text), false, Behavior::Isolated, out);
      pieces.swap(out);
    }
    // Map every byte to its printable stand-in so the vocabulary (stored that way) applies.
    for (auto& p : pieces) {
      std::string m;
      m.reserve(p.text.size() * 2);
      for (unsigned char c : p.text) m += utf8::byte_to_unicode(c);
      p.text.swap(m);
    }
  }

 private:
  bool add_prefix_space_, use_regex_;
  std::unique_ptr<Regex> regex_;
};

class MetaspacePT : public PreTokenizer {
 public:
  MetaspacePT(const nlohmann::json& j) {
    replacement_ = j.value("replacement", std::string("\xE2\x96\x81"));
    std::string scheme = "always";
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      scheme = j["prepend_scheme"].get<std::string>();
    } else if (j.contains("add_prefix_space")) {
      scheme = j["add_prefix_space"].get<bool>() ? "always" : "never";
    }
    if (scheme == "always") scheme_ = 0;
    else if (scheme == "first") scheme_ = 1;
    else if (scheme == "never") scheme_ = 2;
    else NV_THROW("tokenizer: unknown Metaspace prepend_scheme '", scheme, "'");
    split_ = j.value("split", true);
  }
  void apply(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    for (auto& p : pieces) {
      std::string t = replace_all(p.text, " ", replacement_);
      bool starts = t.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == 0 || (scheme_ == 1 && p.at_start))) t = replacement_ + t;
      PreToken cur{std::move(t), p.at_start};
      if (!split_) {
        if (!cur.text.empty()) out.push_back(std::move(cur));
        continue;
      }
      std::vector<std::pair<size_t, size_t>> m;
      for (size_t pos = cur.text.find(replacement_); pos != std::string::npos;
           pos = cur.text.find(replacement_, pos + replacement_.size()))
        m.emplace_back(pos, pos + replacement_.size());
      emit_parts(cur, m, false, Behavior::MergedWithNext, out);
    }
    pieces.swap(out);
  }

 private:
  std::string replacement_;
  int scheme_ = 0;
  bool split_ = true;
};

// Digits, Whitespace, WhitespaceSplit: fixed regexes with a split behavior.
class RegexPT : public PreTokenizer {
 public:
  RegexPT(const std::string& re, Behavior b, bool invert)
      : regex_(std::make_unique<Regex>(re)), behavior_(b), invert_(invert) {}
  void apply(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    for (auto& p : pieces) emit_parts(p, regex_->find_all(p.text), invert_, behavior_, out);
    pieces.swap(out);
  }

 private:
  std::unique_ptr<Regex> regex_;
  Behavior behavior_;
  bool invert_;
};

class SequencePT : public PreTokenizer {
 public:
  explicit SequencePT(std::vector<std::unique_ptr<PreTokenizer>> v) : items_(std::move(v)) {}
  void apply(std::vector<PreToken>& pieces) const override {
    for (auto& p : items_) p->apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  NV_CHECK(j.is_object() && j.contains("type"), "tokenizer: pre_tokenizer without a type: ", j.dump());
  std::string type = j["type"].get<std::string>();
  if (type == "Split") return std::make_unique<SplitPT>(j);
  if (type == "ByteLevel") return std::make_unique<ByteLevelPT>(j);
  if (type == "Metaspace") return std::make_unique<MetaspacePT>(j);
  if (type == "Digits")
    return j.value("individual_digits", false)
               ? std::make_unique<RegexPT>(R"(\p{N})", Behavior::Isolated, false)
               : std::make_unique<RegexPT>(R"(\p{N}+)", Behavior::Isolated, false);
  if (type == "Whitespace") return std::make_unique<RegexPT>(R"(\w+|[^\w\s]+)", Behavior::Removed, true);
  if (type == "WhitespaceSplit") return std::make_unique<RegexPT>(R"(\s+)", Behavior::Removed, false);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> v;
    for (auto& p : j.at("pretokenizers"))
      if (auto q = make_pre_tokenizer(p)) v.push_back(std::move(q));
    return std::make_unique<SequencePT>(std::move(v));
  }
  NV_THROW("tokenizer: unsupported pre_tokenizer type '", type, "'");
}

}  // namespace nanovllm
