// GGUF tokenizer metadata -> tokenizer.json / tokenizer_config.json text (see gguf_vocab.h and
// README.md "GGUF vocabularies"). The semantics follow llama.cpp's vocabulary loader (which keys
// mean what, the defaults, the pre-tokenizer names) and the HF tokenizer.json files of the models
// those names stand for (the regexes, the normalizers): the generated files give the ids of the
// model's own tokenizer.json.
#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/utf8.h"
#include "util/check.h"

namespace nanovllm {
namespace {

using json = nlohmann::json;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type; 0 is "undefined").
// clang-format off
enum : int32_t { kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
// clang-format on

// Word regexes of the byte-level vocabularies, as their tokenizer.json files write them
// (PCRE2 reads them as Oniguruma does).
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: combining marks stay with their letters.
constexpr const char* kQwen35Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Mistral's tekken: upper-case runs and lower-case runs are separate words.
constexpr const char* kTekkenRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k (GPT-4o, Llama 4): tekken's words with the English contractions attached.
constexpr const char* kGpt4oRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// How a byte-level vocabulary pre-tokenizes, by tokenizer.ggml.pre.
struct PreSpec {
  std::vector<std::string> names;
  std::vector<std::string> splits;  // Split (Isolated) regexes, applied in order
  bool gpt2_regex;                  // then ByteLevel with use_regex (the GPT-2 word regex)
  bool nfc;                         // NFC normalizer first
  bool ignore_merges;  // a word that is a token is not merged (llama.cpp: Llama-3, tekken)
  bool add_bos;        // add_bos_token when the file does not say (llama.cpp's default)
  bool clean_spaces;   // clean_up_tokenization_spaces (llama.cpp's per-name value)
};

// "" (key absent) and "default" are taken as Llama-3 (the byte-level GGUFs written before the
// key existed are Llama-3 ones); llama.cpp itself uses an older generic split for them.
// clang-format off
const PreSpec kPreSpecs[] = {
    {{"", "default"}, {kLlama3Regex}, false, false, true, false, true},
    {{"llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral"}, {kLlama3Regex}, false, false, true, true, true},
    {{"dbrx", "smaug-bpe"}, {kLlama3Regex}, false, false, false, false, true},
    {{"qwen2", "deepseek-r1-qwen"}, {kQwen2Regex}, false, true, false, false, false},
    {{"qwen35"}, {kQwen35Regex}, false, false, false, false, false},
    {{"gpt-2", "gpt2", "phi-2"}, {}, true, false, false, false, true},
    {{"mpt"}, {}, true, true, false, false, true},  // GPT-NeoX's tokenizer: NFC first
    {{"starcoder", "refact", "codeshell"}, {R"(\p{N})"}, true, false, false, false, true},
    {{"smollm", "command-r"}, {R"(\p{N})"}, true, false, false, false, false},
    {{"deepseek-coder"},
     {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", R"([一-龥ࠀ-一가-퟿]+)", R"(\p{N})"},
     false, false, false, false, false},
    // Falcon: runs of punctuation (Unicode's and ASCII's), GPT-2 words, digits in threes.
    {{"falcon"},
     {R"([\p{P}$+<=>^~|`]+)", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
      R"([0-9][0-9][0-9])"},
     false, false, false, false, true},
    {{"tekken"}, {kTekkenRegex}, false, false, true, true, false},
    {{"gpt-4o", "llama4"}, {kGpt4oRegex}, false, false, false, false, false},
};
// clang-format on

const PreSpec* find_pre(const std::string& pre) {
  for (const PreSpec& s : kPreSpecs)
    for (const std::string& n : s.names)
      if (pre == n) return &s;
  return nullptr;
}

std::string supported_pre_list() {
  std::string out;
  for (const PreSpec& s : kPreSpecs)
    for (const std::string& n : s.names)
      if (!n.empty()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// A JSON string literal. The text must be valid UTF-8 (checked by the caller).
void append_quoted(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
}

bool is_byte_token(std::string_view t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.substr(0, 3) == "<0x" && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

// One derived SentencePiece merge: left + right = token `id`, split after `cut` bytes.
struct SpMerge {
  float score;
  int id, cut, left, right;
};

class Builder {
 public:
  Builder(const GgufVocab& v, const std::string& where) : v_(v), where_(where) {}
  TokenizerFiles build();

 private:
  template <class... A>
  [[noreturn]] void fail(const A&... msg) const {
    NV_THROW(where_, ": ", msg...);
  }
  int n() const { return static_cast<int>(v_.tokens.size()); }
  int32_t type(int id) const { return v_.token_types.empty() ? kUndefined : v_.token_types[id]; }
  void check_arrays();
  void check_id(const std::optional<int>& id, const char* key);
  void index_tokens();
  int find(std::string_view t) const {
    auto it = ids_.find(t);
    return it == ids_.end() ? -1 : it->second;
  }
  bool is_special(int id) const;
  void stored_merges();
  void derived_merges();
  std::string tokenizer_json(const json& added, const json& normalizer, const json& pre_tokenizer,
                             const json& decoder, const std::optional<std::string>& unk,
                             bool byte_fallback, bool ignore_merges) const;

  const GgufVocab& v_;
  const std::string& where_;
  std::vector<std::string> tok_;  // tokens, empty ones named as llama.cpp names them
  std::unordered_map<std::string_view, int> ids_;
  std::vector<std::pair<int, int>> merges_;  // (left id, right id) in rank order
};

void Builder::check_arrays() {
  if (v_.tokens.empty()) fail("tokenizer.ggml.tokens is missing or empty");
  if (v_.tokens.size() >= static_cast<size_t>(INT32_MAX))
    fail("tokenizer.ggml.tokens is too large");
  if (!v_.scores.empty() && v_.scores.size() != v_.tokens.size())
    fail("tokenizer.ggml.scores has ", v_.scores.size(), " entries for ", v_.tokens.size(),
         " tokens");
  if (!v_.token_types.empty() && v_.token_types.size() != v_.tokens.size())
    fail("tokenizer.ggml.token_type has ", v_.token_types.size(), " entries for ", v_.tokens.size(),
         " tokens");
  for (size_t i = 0; i < v_.token_types.size(); ++i)
    if (v_.token_types[i] < kUndefined || v_.token_types[i] > kByte)
      fail("tokenizer.ggml.token_type[", i, "] is ", v_.token_types[i], " (valid: 0-6)");
  for (size_t i = 0; i < v_.scores.size(); ++i)
    if (std::isnan(v_.scores[i])) fail("tokenizer.ggml.scores[", i, "] is NaN");
  check_id(v_.bos_id, "bos_token_id");
  check_id(v_.eos_id, "eos_token_id");
  check_id(v_.unk_id, "unknown_token_id");
  check_id(v_.pad_id, "padding_token_id");
  check_id(v_.eot_id, "eot_token_id");
  check_id(v_.eom_id, "eom_token_id");
  if (!utf8::is_valid(v_.chat_template)) fail("tokenizer.chat_template is not valid UTF-8");
}

void Builder::check_id(const std::optional<int>& id, const char* key) {
  if (id && (*id < 0 || *id >= n()))
    fail("tokenizer.ggml.", key, " is ", *id, ", outside the vocabulary of ", n(), " tokens");
}

// Token strings must be valid UTF-8 (tokenizer.json is JSON text) and distinct (an id per
// string; llama.cpp refuses such files too). An empty token is renamed "[EMPTY_<id>]" as
// llama.cpp does, so it still has its id.
void Builder::index_tokens() {
  tok_.resize(v_.tokens.size());
  ids_.reserve(v_.tokens.size() * 2);
  for (int i = 0; i < n(); ++i) {
    const std::string& t = v_.tokens[i];
    if (!utf8::is_valid(t)) fail("token ", i, " of tokenizer.ggml.tokens is not valid UTF-8");
    tok_[i] = t.empty() ? "[EMPTY_" + std::to_string(i) + "]" : t;
  }
  for (int i = 0; i < n(); ++i) {
    auto [it, fresh] = ids_.emplace(std::string_view(tok_[i]), i);
    if (!fresh)
      fail("tokens ", it->second, " and ", i, " of tokenizer.ggml.tokens are both '", tok_[i], "'");
  }
}

// Special (control) tokens: CONTROL and UNKNOWN types; without types, the ids named by keys.
bool Builder::is_special(int id) const {
  if (!v_.token_types.empty()) return type(id) == kControl || type(id) == kUnknown;
  for (const auto& k : {v_.bos_id, v_.eos_id, v_.unk_id, v_.pad_id, v_.eot_id, v_.eom_id})
    if (k && *k == id) return true;
  return false;
}

// tokenizer.ggml.merges: "left right", split at the first space after the first byte (as
// llama.cpp does, so a left part may begin with a space). Both parts and their concatenation
// must be tokens.
void Builder::stored_merges() {
  merges_.reserve(v_.merges.size());
  for (size_t r = 0; r < v_.merges.size(); ++r) {
    const std::string& m = v_.merges[r];
    size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos)
      fail("merge ", r, " of tokenizer.ggml.merges ('", m, "') is not 'left right'");
    std::string_view a = std::string_view(m).substr(0, sp), b = std::string_view(m).substr(sp + 1);
    int ia = find(a), ib = find(b);
    if (ia < 0 || ib < 0)
      fail("merge ", r, " of tokenizer.ggml.merges ('", m,
           "') names a token that is not in the vocabulary ('", ia < 0 ? a : b, "')");
    std::string joined = std::string(a) + std::string(b);
    if (find(joined) < 0)
      fail("merge ", r, " of tokenizer.ggml.merges ('", m, "') gives '", joined,
           "', which is not in the vocabulary");
    merges_.emplace_back(ia, ib);
  }
}

// SentencePiece BPE keeps merging the adjacent pair whose concatenation is a vocabulary piece
// with the highest score (leftmost on ties). As an HF merge list: for every piece, each way of
// cutting it into two pieces is a merge; merges are ordered by the merged piece's score
// (highest first), then by its id (lowest first: ties between different pieces), then by
// the cut (shortest left part first). Control, unknown and byte tokens are never merge parts or
// results (SentencePiece keeps them out of its piece table).
void Builder::derived_merges() {
  if (v_.scores.empty())
    fail("tokenizer.ggml.model 'llama' needs tokenizer.ggml.scores (or tokenizer.ggml.merges)");
  auto mergeable = [&](int id) {
    int32_t t = type(id);
    if (v_.token_types.empty()) return !is_special(id) && !is_byte_token(tok_[id]);
    return t != kControl && t != kUnknown && t != kByte;
  };
  // Cuts are found with polynomial hashes of each piece's prefixes and suffixes (a string
  // comparison confirms every hit): linear in the vocabulary's bytes plus the merges found, also
  // for long pieces.
  constexpr uint64_t kBase = 0x100000001b3ULL;
  auto key = [](uint64_t h, size_t len) { return h ^ (len * 0x9E3779B97F4A7C15ULL); };
  std::unordered_map<uint64_t, int> by_hash;
  size_t max_len = 0;
  for (int id = 0; id < n(); ++id) {
    if (!mergeable(id)) continue;
    uint64_t h = 0;
    for (unsigned char c : tok_[id]) h = h * kBase + c;
    by_hash.emplace(key(h, tok_[id].size()), id);
    max_len = std::max(max_len, tok_[id].size());
  }
  auto lookup = [&](std::string_view s, uint64_t h) {
    auto it = by_hash.find(key(h, s.size()));
    if (it == by_hash.end()) return -1;
    if (tok_[it->second] == s) return it->second;
    int id = find(s);  // another piece with the same hash
    return id >= 0 && mergeable(id) ? id : -1;
  };
  std::vector<uint64_t> pw(max_len + 1, 1), pre(max_len + 1, 0);
  for (size_t k = 1; k <= max_len; ++k) pw[k] = pw[k - 1] * kBase;
  std::vector<SpMerge> all;
  for (int id = 0; id < n(); ++id) {
    std::string_view t = tok_[id];
    if (!mergeable(id) || t.size() < 2) continue;
    for (size_t k = 0; k < t.size(); ++k)
      pre[k + 1] = pre[k] * kBase + static_cast<unsigned char>(t[k]);
    for (size_t i = 1; i < t.size(); ++i) {
      if ((static_cast<unsigned char>(t[i]) & 0xC0) == 0x80) continue;  // inside a character
      int l = lookup(t.substr(0, i), pre[i]);
      if (l < 0) continue;
      int r = lookup(t.substr(i), pre[t.size()] - pre[i] * pw[t.size() - i]);
      if (r >= 0) all.push_back({v_.scores[id], id, static_cast<int>(i), l, r});
    }
  }
  std::sort(all.begin(), all.end(), [](const SpMerge& a, const SpMerge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.id != b.id) return a.id < b.id;
    return a.cut < b.cut;
  });
  merges_.reserve(all.size());
  for (const SpMerge& m : all) merges_.emplace_back(m.left, m.right);
}

std::string Builder::tokenizer_json(const json& added, const json& normalizer,
                                    const json& pre_tokenizer, const json& decoder,
                                    const std::optional<std::string>& unk, bool byte_fallback,
                                    bool ignore_merges) const {
  size_t bytes = 0;
  for (const auto& t : tok_) bytes += t.size() + 16;
  std::string out;
  out.reserve(2 * bytes + merges_.size() * 24 + 4096);
  out += R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":)";
  out += added.dump();
  out += R"(,"normalizer":)" + normalizer.dump();
  out += R"(,"pre_tokenizer":)" + pre_tokenizer.dump();
  out += R"(,"post_processor":null,"decoder":)" + decoder.dump();
  out += R"(,"model":{"type":"BPE","dropout":null,"unk_token":)";
  if (unk)
    append_quoted(out, *unk);
  else
    out += "null";
  out += R"(,"continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":)";
  out += byte_fallback ? "true" : "false";  // SentencePiece: fused unk and byte fallback
  out += R"(,"byte_fallback":)";
  out += byte_fallback ? "true" : "false";
  out += R"(,"ignore_merges":)";
  out += ignore_merges ? "true" : "false";
  out += R"(,"vocab":{)";
  for (int i = 0; i < n(); ++i) {
    if (i) out.push_back(',');
    append_quoted(out, tok_[i]);
    out += ':' + std::to_string(i);
  }
  out += R"(},"merges":[)";
  for (size_t r = 0; r < merges_.size(); ++r) {
    if (r) out.push_back(',');
    out.push_back('[');
    append_quoted(out, tok_[merges_[r].first]);
    out.push_back(',');
    append_quoted(out, tok_[merges_[r].second]);
    out.push_back(']');
  }
  out += "]}}";
  return out;
}

TokenizerFiles Builder::build() {
  const bool spm = v_.model == "llama";
  if (v_.model != "gpt2" && !spm)
    fail("tokenizer.ggml.model '", v_.model,
         "' is not supported (supported: 'gpt2' byte-level BPE, 'llama' SentencePiece BPE); a "
         "tokenizer.json "
         "next to the .gguf file is used instead of the GGUF vocabulary");
  const PreSpec* pre = nullptr;
  if (!spm) {
    pre = find_pre(v_.pre);
    if (!pre)
      fail("tokenizer.ggml.pre '", v_.pre, "' is not supported (supported: ", supported_pre_list(),
           "); a tokenizer.json next to the .gguf file is used instead of the GGUF vocabulary");
  }
  check_arrays();
  index_tokens();

  // Defaults of the optional keys (llama.cpp's): SentencePiece vocabularies have <unk> 0, <s> 1,
  // </s> 2, add a BOS and a space prefix.
  auto dflt = [&](const std::optional<int>& id, int d) -> std::optional<int> {
    if (id) return id;
    if (spm && d < n()) return d;
    return std::nullopt;
  };
  std::optional<int> bos = dflt(v_.bos_id, 1), eos = dflt(v_.eos_id, 2), unk = dflt(v_.unk_id, 0);
  bool add_bos = v_.add_bos.value_or(spm ? true : pre->add_bos);
  bool add_eos = v_.add_eos.value_or(false);
  if (v_.add_bos.value_or(false) && !bos)
    fail("tokenizer.ggml.add_bos_token is true but there is no bos_token_id");
  if (v_.add_eos.value_or(false) && !eos)
    fail("tokenizer.ggml.add_eos_token is true but there is no eos_token_id");

  if (!v_.merges.empty())
    stored_merges();
  else if (spm)
    derived_merges();
  else
    fail("tokenizer.ggml.merges is missing or empty (needed by tokenizer.ggml.model 'gpt2')");

  // Added tokens: control (and unknown) tokens are special; user-defined ones are not. Both are
  // matched in the raw text before normalization, as HF does for tokens with normalized: false.
  json added = json::array();
  for (int id = 0; id < n(); ++id) {
    bool special = is_special(id);
    if (!special && type(id) != kUserDefined) continue;
    added.push_back({{"id", id},
                     {"content", tok_[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", special}});
  }

  json normalizer, pre_tokenizer, decoder;
  std::optional<std::string> unk_token;
  bool byte_fallback = false, ignore_merges = false, clean_spaces = false;
  if (spm) {
    // HF's Llama-2 (legacy) tokenizer.json: spaces become "▁" and every text piece gets one in
    // front; the decoder undoes both.
    const std::string kSpace = "\xE2\x96\x81";  // U+2581
    json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}};
    if (v_.add_space_prefix.value_or(true))
      normalizer = {
          {"type", "Sequence"},
          {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", kSpace}}, replace})}};
    else
      normalizer = replace;
    json steps =
        json::array({{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                     {{"type", "ByteFallback"}},
                     {{"type", "Fuse"}}});
    if (v_.add_space_prefix.value_or(true))
      steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    decoder = {{"type", "Sequence"}, {"decoders", steps}};
    if (unk) unk_token = tok_[*unk];
    byte_fallback = true;
  } else {
    if (pre->nfc) normalizer = {{"type", "NFC"}};
    json seq = json::array();
    for (const std::string& re : pre->splits)
      seq.push_back({{"type", "Split"},
                     {"pattern", {{"Regex", re}}},
                     {"behavior", "Isolated"},
                     {"invert", false}});
    seq.push_back({{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"trim_offsets", false},
                   {"use_regex", pre->gpt2_regex}});
    pre_tokenizer = seq.size() == 1 ? seq[0] : json{{"type", "Sequence"}, {"pretokenizers", seq}};
    decoder = {{"type", "ByteLevel"},
               {"add_prefix_space", false},
               {"trim_offsets", false},
               {"use_regex", false}};
    ignore_merges = pre->ignore_merges;
    clean_spaces = pre->clean_spaces;
  }

  json cfg = json::object();
  cfg["tokenizer_class"] = "PreTrainedTokenizerFast";
  cfg["add_bos_token"] = add_bos;
  cfg["add_eos_token"] = add_eos;
  auto name = [&](const std::optional<int>& id) { return id ? json(tok_[*id]) : json(nullptr); };
  cfg["bos_token"] = name(bos);
  cfg["eos_token"] = name(eos);
  cfg["unk_token"] = name(unk);
  cfg["pad_token"] = name(v_.pad_id);
  cfg["clean_up_tokenization_spaces"] = clean_spaces;
  if (!v_.chat_template.empty()) cfg["chat_template"] = v_.chat_template;

  TokenizerFiles f;
  f.tokenizer_json = tokenizer_json(added, normalizer, pre_tokenizer, decoder, unk_token,
                                    byte_fallback, ignore_merges);
  f.tokenizer_config_json = cfg.dump();
  return f;
}

}  // namespace

TokenizerFiles tokenizer_files_from_gguf(const GgufVocab& v, const std::string& where) {
  return Builder(v, where).build();
}

std::vector<int> gguf_eos_token_ids(const GgufVocab& v) {
  int n = static_cast<int>(v.tokens.size());
  std::optional<int> eos = v.eos_id;
  if (!eos && v.model == "llama") eos = 2;
  std::vector<int> ids;
  for (const auto& id : {eos, v.eot_id, v.eom_id})
    if (id && *id >= 0 && *id < n && std::find(ids.begin(), ids.end(), *id) == ids.end())
      ids.push_back(*id);
  return ids;
}

}  // namespace nanovllm
