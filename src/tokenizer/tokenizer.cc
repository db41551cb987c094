// Tokenizer: loading tokenizer.json / tokenizer_config.json and the encode / decode pipelines
// (added tokens -> normalizer -> pre-tokenizer -> BPE -> post-processor; ids -> decoder).
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_map>

#include "tokenizer/added_vocab.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/utf8.h"
#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm {

namespace {
enum : uint8_t { kKnown = 1, kSpecial = 2, kFallbackByte = 4 };

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  NV_CHECK(f.good(), "tokenizer: cannot open ", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// tokenizer_config.json names tokens as a string or as an AddedToken object {"content": ...}.
std::string token_name(const nlohmann::json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}
}  // namespace

struct Tokenizer::Impl {
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  StringMap<int> added_by_content;
  AddedTokenMatcher raw_matcher;   // added tokens with normalized=false
  AddedTokenMatcher norm_matcher;  // added tokens with normalized=true (patterns normalized)
  std::vector<std::string_view> id_tok;  // id -> token string (in the model or added_content)
  std::vector<std::string> added_content;  // strings of added tokens (reserved: views stay valid)
  std::vector<uint8_t> id_flags;
  int vocab_size = 0;

  nlohmann::json config = nlohmann::json::object();
  std::string chat_template, bos, eos;
  int bos_id = -1, eos_id = -1;
  std::vector<int> eos_ids;
  bool add_bos = false, add_eos = false, cleanup = false;
  bool byte_level_decoder = false;  // a ByteLevel step in the decoder: token chars map to bytes
  int context_id = -1;              // token_bytes: a plain token to decode others after

  void load(const std::string& json_text, const std::string& config_text, const std::string& gen_text);
  void encode_text(std::string& text, bool at_start, std::vector<int>& ids) const;
};

void Tokenizer::Impl::load(const std::string& json_text, const std::string& config_text,
                           const std::string& gen_text) {
  TokenizerJson tj = parse_tokenizer_json(json_text);
  const auto& doc = tj.doc;
  NV_CHECK(doc.is_object() && doc.contains("model") && doc["model"].is_object(),
           "tokenizer.json: missing 'model' object");
  const auto& m = doc["model"];
  std::string type = m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>()
                                                                 : (tj.has_merges ? "BPE" : "");
  if (type != "BPE")
    NV_THROW("tokenizer: unsupported model type '", type.empty() ? "(none)" : type,
             "' (only BPE is supported)");
  NV_CHECK(tj.has_vocab, "tokenizer.json: BPE model without a vocab object");
  BpeOptions opt;
  auto str_or_empty = [&](const char* k) {
    return m.contains(k) && m[k].is_string() ? m[k].get<std::string>() : std::string();
  };
  if (m.contains("unk_token") && m["unk_token"].is_string()) opt.unk_token = m["unk_token"].get<std::string>();
  opt.continuing_subword_prefix = str_or_empty("continuing_subword_prefix");
  opt.end_of_word_suffix = str_or_empty("end_of_word_suffix");
  auto flag = [&](const char* k) { return m.contains(k) && m[k].is_boolean() && m[k].get<bool>(); };
  opt.fuse_unk = flag("fuse_unk");
  opt.byte_fallback = flag("byte_fallback");
  opt.ignore_merges = flag("ignore_merges");
  model = std::make_unique<BpeModel>(tj, opt);

  auto get = [&](const char* k) { return doc.contains(k) ? doc[k] : nlohmann::json(); };
  normalizer = make_normalizer(get("normalizer"));
  pre_tokenizer = make_pre_tokenizer(get("pre_tokenizer"));
  post_processor = make_post_processor(get("post_processor"));
  decoder = make_decoder(get("decoder"));
  std::function<bool(const nlohmann::json&)> has_byte_level = [&](const nlohmann::json& d) {
    if (!d.is_object() || !d.contains("type") || !d["type"].is_string()) return false;
    if (d["type"] == "ByteLevel") return true;
    if (d["type"] == "Sequence" && d.contains("decoders") && d["decoders"].is_array())
      for (auto& x : d["decoders"])
        if (has_byte_level(x)) return true;
    return false;
  };
  byte_level_decoder = has_byte_level(get("decoder"));

  // Id table: model vocabulary, then added tokens (which may reuse model ids).
  int max_id = model->max_id();
  std::vector<AddedToken> added;
  if (doc.contains("added_tokens")) {
    for (auto& a : doc["added_tokens"]) {
      AddedToken t;
      t.id = a.at("id").get<int>();
      t.content = a.at("content").get<std::string>();
      t.single_word = a.value("single_word", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      t.normalized = a.value("normalized", !a.value("special", false));
      t.special = a.value("special", false);
      NV_CHECK(t.id >= 0, "tokenizer: added token '", t.content, "' has a negative id");
      max_id = std::max(max_id, t.id);
      added.push_back(std::move(t));
    }
  }
  id_tok.assign(max_id + 1, std::string_view());
  id_flags.assign(max_id + 1, 0);
  vocab_size = static_cast<int>(model->vocab_size());
  for (int id = 0; id <= model->max_id(); ++id) {
    std::string_view t;
    if (model->id_to_token(id, &t)) {
      id_tok[id] = t;
      id_flags[id] = kKnown;
      unsigned char b;
      if (decoder && decoder->uses_byte_fallback() && parse_byte_token(t, &b)) id_flags[id] |= kFallbackByte;
    }
  }
  for (int id = 0; id <= model->max_id() && context_id < 0; ++id) {  // first token of one ASCII letter
    std::string_view t = id_tok[id];
    if (t.size() == 1 && std::isalpha(static_cast<unsigned char>(t[0]))) context_id = id;
  }
  std::vector<AddedToken> raw_tokens, norm_tokens;
  std::vector<std::string> raw_pats, norm_pats;
  added_content.reserve(added.size());
  for (auto& t : added) {
    if (!(id_flags[t.id] & kKnown)) ++vocab_size;
    added_content.push_back(t.content);
    id_tok[t.id] = added_content.back();
    id_flags[t.id] = kKnown | (t.special ? kSpecial : 0);
    added_by_content[t.content] = t.id;
    if (t.normalized && normalizer) {
      std::string p = t.content;
      normalizer->normalize(p);
      norm_pats.push_back(std::move(p));
      norm_tokens.push_back(t);
    } else {
      raw_pats.push_back(t.content);
      raw_tokens.push_back(t);
    }
  }
  raw_matcher.build(std::move(raw_tokens), std::move(raw_pats));
  norm_matcher.build(std::move(norm_tokens), std::move(norm_pats));

  if (!config_text.empty()) {
    config = parse_json(config_text, "tokenizer_config.json");
    NV_CHECK(config.is_object(), "tokenizer_config.json must be a JSON object");
  }
  if (config.contains("chat_template") && config["chat_template"].is_string())
    chat_template = config["chat_template"].get<std::string>();
  bos = token_name(config, "bos_token");
  eos = token_name(config, "eos_token");
  auto lookup = [&](const std::string& s) -> int {
    if (s.empty()) return -1;
    if (auto it = added_by_content.find(s); it != added_by_content.end()) return it->second;
    auto id = model->token_to_id(s);
    return id ? *id : -1;
  };
  bos_id = lookup(bos);
  auto cfg_bool = [&](const char* k) {
    return config.contains(k) && config[k].is_boolean() && config[k].get<bool>();
  };
  add_bos = cfg_bool("add_bos_token");
  add_eos = cfg_bool("add_eos_token");
  cleanup = cfg_bool("clean_up_tokenization_spaces");
  eos_id = lookup(eos);
  if (!gen_text.empty()) {
    auto gen = parse_json(gen_text, "generation_config.json");
    if (gen.contains("eos_token_id")) {
      const auto& e = gen["eos_token_id"];
      if (e.is_number_integer()) eos_ids.push_back(e.get<int>());
      else if (e.is_array())
        for (auto& x : e) eos_ids.push_back(x.get<int>());
    }
  }
  if (eos_ids.empty() && eos_id >= 0) eos_ids.push_back(eos_id);
}

void Tokenizer::Impl::encode_text(std::string& text, bool at_start, std::vector<int>& ids) const {
  if (text.empty()) return;
  std::vector<PreToken> pieces;
  pieces.push_back({std::move(text), at_start});
  if (pre_tokenizer) pre_tokenizer->apply(pieces);
  for (auto& p : pieces) model->tokenize(p.text, ids);
}

// Malformed JSON or a field of the wrong type surfaces from nlohmann as its own exception type;
// callers expect nanovllm::Error.
static void load_or_throw(Tokenizer::Impl& im, const std::string& json_text, const std::string& config_text,
                          const std::string& gen_text) {
  try {
    im.load(json_text, config_text, gen_text);
  } catch (const nlohmann::json::exception& e) {
    NV_THROW("tokenizer: bad tokenizer.json / tokenizer_config.json / generation_config.json: ", e.what());
  }
}

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_json(const std::string& json_text, const std::string& config_text) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  load_or_throw(*t->impl_, json_text, config_text, "");
  return t;
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf_vocab(const GgufVocab& vocab, const std::string& where) {
  TokenizerFiles files = tokenizer_files_from_gguf(vocab, where);
  nlohmann::json gen = {{"eos_token_id", gguf_eos_token_ids(vocab)}};
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  try {
    load_or_throw(*t->impl_, files.tokenizer_json, files.tokenizer_config_json, gen.dump());
  } catch (const Error& e) {  // the generated files are rejected: say which .gguf they came from
    NV_THROW(where, ": ", e.what());
  }
  return t;
}

std::unique_ptr<Tokenizer> Tokenizer::from_dir(const std::string& dir) {
  auto exists = [](const std::string& p) { return std::ifstream(p).good(); };
  std::string tj = dir + "/tokenizer.json";
  NV_CHECK(exists(tj), "tokenizer: no tokenizer.json in '", dir, "'");
  std::string cfg = dir + "/tokenizer_config.json", gen = dir + "/generation_config.json";
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  load_or_throw(*t->impl_, read_file(tj), exists(cfg) ? read_file(cfg) : "", exists(gen) ? read_file(gen) : "");
  return t;
}

std::vector<int> Tokenizer::encode(std::string_view input, bool add_special_tokens) const {
  const Impl& im = *impl_;
  std::string clean;
  std::string_view text = input;
  if (!utf8::is_valid(input)) {
    clean = utf8::sanitize(input);
    text = clean;
  }
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> segs = im.raw_matcher.empty() ? std::vector<Segment>{{-1, 0, text.size()}}
                                                     : im.raw_matcher.split(text);
  for (const Segment& s : segs) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    std::string piece(text.substr(s.b, s.e - s.b));
    if (im.normalizer) im.normalizer->normalize(piece);
    if (im.norm_matcher.empty()) {
      im.encode_text(piece, s.b == 0, ids);
      continue;
    }
    for (const Segment& t : im.norm_matcher.split(piece)) {
      if (t.id >= 0) {
        ids.push_back(t.id);
      } else {
        std::string sub = piece.substr(t.b, t.e - t.b);
        im.encode_text(sub, s.b == 0 && t.b == 0, ids);
      }
    }
  }
  if (add_special_tokens) {
    if (im.post_processor && im.post_processor->adds_special_tokens()) {
      ids = im.post_processor->process(std::move(ids));
    } else {
      if (im.add_bos && im.bos_id >= 0) ids.insert(ids.begin(), im.bos_id);
      if (im.add_eos && im.eos_id >= 0) ids.push_back(im.eos_id);
    }
  }
  return ids;
}

std::string Tokenizer::decode_raw(const int* ids, size_t n, bool skip) const {
  const Impl& im = *impl_;
  std::vector<std::string> toks;
  toks.reserve(n);
  for (size_t k = 0; k < n; ++k)
    if (!is_dropped(ids[k], skip)) toks.emplace_back(im.id_tok[ids[k]]);
  std::string out;
  if (im.decoder) {
    im.decoder->decode_chain(toks);
    for (auto& t : toks) out += t;
  } else {
    for (size_t k = 0; k < toks.size(); ++k) {
      if (k) out.push_back(' ');
      out += toks[k];
    }
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int>& ids, bool skip_special_tokens) const {
  std::string s = decode_raw(ids.data(), ids.size(), skip_special_tokens);
  return impl_->cleanup ? clean_up_spaces(s) : s;
}

std::string Tokenizer::clean_up_spaces(std::string_view text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  std::string s(text);
  for (auto& [from, to] : kRules) s = replace_all(s, from, to);
  return s;
}

bool Tokenizer::clean_up_tokenization_spaces() const { return impl_->cleanup; }

bool Tokenizer::is_dropped(int id, bool skip) const {
  const Impl& im = *impl_;
  if (id < 0 || id >= static_cast<int>(im.id_flags.size()) || !(im.id_flags[id] & kKnown)) return true;
  return skip && (im.id_flags[id] & kSpecial);
}

bool Tokenizer::is_fallback_byte(int id) const {
  const Impl& im = *impl_;
  return id >= 0 && id < static_cast<int>(im.id_flags.size()) && (im.id_flags[id] & kFallbackByte);
}

std::string Tokenizer::token_bytes(int id) const {
  const Impl& im = *impl_;
  if (is_dropped(id, false)) return "";
  std::string_view t = im.id_tok[id];
  unsigned char b;
  if (is_fallback_byte(id) && parse_byte_token(t, &b)) return std::string(1, static_cast<char>(b));
  if (im.byte_level_decoder) {  // as ByteLevelDec: chars -> bytes, else the raw token text
    std::string out;
    for (size_t i = 0; i < t.size();) {
      int v = utf8::unicode_to_byte(utf8::next_cp(t, i));
      if (v < 0) return std::string(t);
      out.push_back(static_cast<char>(v));
    }
    return out;
  }
  // Other decoder chains (Metaspace, Replace + Strip...) may treat the first token specially:
  // decode after a plain context token and keep what this id adds.
  if (im.context_id < 0) return decode_raw(&id, 1, false);
  int pair[2] = {im.context_id, id};
  std::string ctx = decode_raw(pair, 1, false), both = decode_raw(pair, 2, false);
  return both.compare(0, ctx.size(), ctx) == 0 ? both.substr(ctx.size()) : both;
}

int Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end()) return it->second;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int id) const {
  if (id < 0 || id >= static_cast<int>(impl_->id_flags.size()) || !(impl_->id_flags[id] & kKnown)) return "";
  return std::string(impl_->id_tok[id]);
}

bool Tokenizer::is_special(int id) const {
  return id >= 0 && id < static_cast<int>(impl_->id_flags.size()) && (impl_->id_flags[id] & kSpecial);
}

int Tokenizer::bos_token_id() const { return impl_->bos_id; }
std::vector<int> Tokenizer::eos_token_ids() const { return impl_->eos_ids; }
std::string Tokenizer::bos_token() const { return impl_->bos; }
std::string Tokenizer::eos_token() const { return impl_->eos; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
const nlohmann::json& Tokenizer::tokenizer_config() const { return impl_->config; }

}  // namespace nanovllm
