// Unit tests with small hand-written tokenizer.json files: BPE merging by rank, unknown tokens,
// byte fallback, added-token matching (longest match, lstrip / rstrip / single_word,
// normalized), post-processing, decoders, streaming decode, invalid UTF-8 and error cases.
// Expected ids are worked out by hand from the tiny vocabularies below.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/incremental.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/check.h"

namespace nanovllm {
namespace {

using json = nlohmann::json;

// vocab: a b c ab abc " " <unk>; merges (a,b) then (ab,c). Added tokens get ids from 7.
json tiny(json added = json::array(), bool fuse_unk = true) {
  json j;
  j["version"] = "1.0";
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "Fuse"}};
  j["model"] = {{"type", "BPE"},
                {"unk_token", "<unk>"},
                {"fuse_unk", fuse_unk},
                {"byte_fallback", false},
                {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}, {" ", 5}, {"<unk>", 6}}},
                {"merges", {"a b", "ab c"}}};
  return j;
}

json added_token(int id, const std::string& content, bool special = true) {
  return {{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},   {"normalized", false}, {"special", special}};
}

std::unique_ptr<Tokenizer> make(const json& j, const json& cfg = json()) {
  return Tokenizer::from_json(j.dump(), cfg.is_null() ? "" : cfg.dump());
}

using V = std::vector<int>;

TEST(TokenizerUnit, BpeMergesByRank) {
  auto t = make(tiny());
  EXPECT_EQ(t->encode("abc"), V({4}));
  EXPECT_EQ(t->encode("abca"), V({4, 0}));
  EXPECT_EQ(t->encode("cab"), V({2, 3}));
  EXPECT_EQ(t->encode("ab ab"), V({3, 5, 3}));
  EXPECT_EQ(t->encode(""), V({}));
  EXPECT_EQ(t->decode({4, 5, 2}), "abc c");
  EXPECT_EQ(t->vocab_size(), 7);
  EXPECT_EQ(t->token_to_id("abc"), 4);
  EXPECT_FALSE(t->token_to_id("zzz").has_value());
  EXPECT_EQ(t->id_to_token(3), "ab");
  EXPECT_EQ(t->id_to_token(99), "");
}

TEST(TokenizerUnit, MergesAsPairsEqualStrings) {
  json j = tiny();
  j["model"]["merges"] = json::array({json::array({"a", "b"}), json::array({"ab", "c"})});
  EXPECT_EQ(make(j)->encode("abcab"), V({4, 3}));
}

TEST(TokenizerUnit, UnknownCharacters) {
  EXPECT_EQ(make(tiny())->encode("azzb"), V({0, 6, 1}));               // fused
  EXPECT_EQ(make(tiny(json::array(), false))->encode("azzb"), V({0, 6, 6, 1}));
}

TEST(TokenizerUnit, AddedTokensLongestMatchFirst) {
  json added = json::array({added_token(7, "<x>"), added_token(8, "<x>ab")});
  auto t = make(tiny(added));
  EXPECT_EQ(t->encode("c<x>abc"), V({2, 8, 2}));
  EXPECT_EQ(t->encode("<x>c<x>"), V({7, 2, 7}));
  EXPECT_EQ(t->encode("<x"), V({6}));  // no match: '<' and 'x' are unknown, fused into one
  EXPECT_TRUE(t->is_special(7));
  EXPECT_EQ(t->vocab_size(), 9);
  EXPECT_EQ(t->decode({3, 7, 2}), "ab<x>c");
  EXPECT_EQ(t->decode({3, 7, 2}, true), "abc");
}

TEST(TokenizerUnit, AddedTokenStripAndSingleWord) {
  json l = added_token(7, "<L>"), r = added_token(8, "<R>"), w = added_token(9, "<W>");
  l["lstrip"] = true;
  r["rstrip"] = true;
  w["single_word"] = true;
  auto t = make(tiny(json::array({l, r, w})));
  EXPECT_EQ(t->encode("ab  <L> ab"), V({3, 7, 5, 3}));   // spaces before <L> are absorbed
  EXPECT_EQ(t->encode("ab  <R>  ab"), V({3, 5, 5, 8, 3}));  // spaces after <R> are absorbed
  EXPECT_EQ(t->encode("a <W> b"), V({0, 5, 9, 5, 1}));
  EXPECT_EQ(t->encode("a<W> b"), V({0, 6, 5, 1}));  // not a whole word: "<W>" -> one fused unk
}

TEST(TokenizerUnit, NormalizedAddedTokensMatchNormalizedText) {
  // Lowercase normalizer; "<ab>" (normalized) is also found in "<AB>".
  json tok = added_token(7, "<ab>", false);
  tok["normalized"] = true;
  json j = tiny(json::array({tok}));
  j["normalizer"] = {{"type", "Lowercase"}};
  auto t = make(j);
  EXPECT_EQ(t->encode("AB<AB>c"), V({3, 7, 2}));
  EXPECT_FALSE(t->is_special(7));
}

TEST(TokenizerUnit, PostProcessorAndBos) {
  json added = json::array({added_token(7, "<s>"), added_token(8, "</s>")});
  json j = tiny(added);
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                         {"pair", json::array()},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {7}}, {"tokens", {"<s>"}}}}}}};
  EXPECT_EQ(make(j)->encode("ab"), V({7, 3}));
  EXPECT_EQ(make(j)->encode("ab", false), V({3}));
  // No post-processor: tokenizer_config's add_bos_token / add_eos_token decide.
  json cfg = {{"bos_token", "<s>"}, {"eos_token", {{"content", "</s>"}}}, {"add_bos_token", true},
              {"add_eos_token", true}};
  auto t = make(tiny(added), cfg);
  EXPECT_EQ(t->encode("ab"), V({7, 3, 8}));
  EXPECT_EQ(t->bos_token_id(), 7);
  EXPECT_EQ(t->eos_token_ids(), V({8}));
  EXPECT_EQ(t->bos_token(), "<s>");
  EXPECT_EQ(t->eos_token(), "</s>");
  EXPECT_EQ(make(tiny(added))->bos_token_id(), -1);
}

// A SentencePiece-style tokenizer: Prepend/Replace normalizer, byte fallback, Strip decoder.
json sentencepiece() {
  json vocab = {{"<unk>", 0}, {"\xE2\x96\x81", 1}, {"h", 2}, {"i", 3}, {"hi", 4}, {"\xE2\x96\x81hi", 5}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 6 + b;
  }
  json j = tiny();
  j["model"] = {{"type", "BPE"}, {"unk_token", "<unk>"}, {"fuse_unk", true}, {"byte_fallback", true},
                {"vocab", vocab}, {"merges", {"h i", "\xE2\x96\x81 hi"}}};
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                                      {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                                {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  return j;
}

TEST(TokenizerUnit, ByteFallbackAndStrip) {
  auto t = make(sentencepiece());
  // "hi hi" -> "▁hi▁hi" -> [▁hi, ▁hi]
  EXPECT_EQ(t->encode("hi hi"), V({5, 5}));
  // "é" = C3 A9 has no piece: byte tokens 6+0xC3, 6+0xA9 after "▁".
  EXPECT_EQ(t->encode("\xC3\xA9"), V({1, 6 + 0xC3, 6 + 0xA9}));
  EXPECT_EQ(t->decode({5, 5}), "hi hi");
  EXPECT_EQ(t->decode({1, 6 + 0xC3, 6 + 0xA9}), "\xC3\xA9");
  // An invalid byte run becomes one U+FFFD per byte.
  EXPECT_EQ(t->decode({6 + 0xC3, 2}), "\xEF\xBF\xBDh");
  EXPECT_EQ(t->decode({6 + 0xE4, 6 + 0xBD}), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

std::string stream(const Tokenizer& t, const V& ids, const V& prompt = {}, bool skip = false) {
  IncrementalDetokenizer d(t, skip, prompt);
  std::string out;
  for (int id : ids) {
    std::string piece = d.push(id);
    EXPECT_TRUE(utf8::is_valid(piece)) << "partial UTF-8 emitted";
    out += piece;
  }
  return out + d.finish();
}

TEST(TokenizerUnit, IncrementalDetokenizer) {
  auto t = make(sentencepiece());
  V ids = {5, 6 + 0xE4, 6 + 0xBD, 6 + 0xA0, 5, 1, 6 + 0xFF, 2, 3};
  EXPECT_EQ(stream(*t, ids), t->decode(ids));
  // The pieces never contain half a character, and held bytes come out once complete.
  IncrementalDetokenizer d(*t, false);
  EXPECT_EQ(d.push(5), "hi");
  EXPECT_EQ(d.push(6 + 0xE4), "");
  EXPECT_EQ(d.push(6 + 0xBD), "");
  EXPECT_EQ(d.push(6 + 0xA0), "");  // a byte run may still grow
  EXPECT_EQ(d.push(5), "\xE4\xBD\xA0 hi");
  EXPECT_EQ(d.finish(), "");
  // An unknown id inside a byte run is dropped and does not end the run: "3" (0x33) followed
  // by a lone continuation byte 0xAC is one invalid run, two U+FFFD.
  V run = {5, 6 + 0x33, 999, 6 + 0xAC, 5};
  EXPECT_EQ(t->decode(run), "hi\xEF\xBF\xBD\xEF\xBF\xBD hi");
  EXPECT_EQ(stream(*t, run), t->decode(run));
  // After a prompt, "▁hi" keeps its space (decode of the pushed ids alone would strip it).
  EXPECT_EQ(stream(*t, {5, 5}, {5}), " hi hi");
}

TEST(TokenizerUnit, CleanUpTokenizationSpaces) {
  EXPECT_EQ(Tokenizer::clean_up_spaces("Hello , world ! it 's a b . c ' d do n't"),
            "Hello, world! it's a b. c'd don't");
  json j = tiny();
  j["model"]["vocab"] = {{"a", 0}, {" ", 1}, {".", 2}, {"'", 3}, {"s", 4}, {"<unk>", 5}};
  j["model"]["merges"] = json::array();
  auto t = make(j, {{"clean_up_tokenization_spaces", true}});
  V ids = {0, 1, 2, 0, 1, 1, 2, 1, 3, 4, 0, 1, 3, 1, 0, 1};
  EXPECT_EQ(t->decode(ids), "a.a .'sa'a ");
  EXPECT_EQ(stream(*t, ids), t->decode(ids));
}

TEST(TokenizerUnit, InvalidUtf8IsReplaced) {
  // Python: bytes.decode("utf-8", "replace") gives one U+FFFD per maximal invalid subpart.
  const std::string R = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8::sanitize("a\xFF" "b"), "a" + R + "b");
  EXPECT_EQ(utf8::sanitize("\xE4\xBD"), R);                   // truncated 3-byte sequence
  EXPECT_EQ(utf8::sanitize("\xED\xA0\x80"), R + R + R);       // UTF-16 surrogate
  EXPECT_EQ(utf8::sanitize("\xF0\x9F\x98" "x"), R + "x");
  EXPECT_EQ(utf8::sanitize("\xC0\xAF"), R + R);               // overlong
  EXPECT_EQ(utf8::sanitize("\xF4\x90\x80\x80"), R + R + R + R);  // > U+10FFFF
  EXPECT_EQ(utf8::sanitize("ok \xE4\xBD\xA0"), "ok \xE4\xBD\xA0");
  // encode() sees the replaced text: an unknown char here, like U+FFFD itself.
  auto t = make(tiny());
  EXPECT_EQ(t->encode("a\xFF" "b"), t->encode("a" + R + "b"));
  EXPECT_EQ(t->encode("a\xFF" "b"), V({0, 6, 1}));
  std::string nul("a\0b", 3);
  EXPECT_EQ(t->encode(nul), V({0, 6, 1}));
}

TEST(TokenizerUnit, ErrorsNameTheUnsupportedType) {
  auto expect_error = [](const json& j, const std::string& needle) {
    try {
      make(j);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  json j = tiny();
  j["model"]["type"] = "Unigram";
  expect_error(j, "Unigram");
  j["model"]["type"] = "WordPiece";
  expect_error(j, "WordPiece");
  j = tiny();
  j["pre_tokenizer"] = {{"type", "BogusPre"}};
  expect_error(j, "BogusPre");
  j = tiny();
  j["normalizer"] = {{"type", "Precompiled"}};
  expect_error(j, "Precompiled");
  j = tiny();
  j["decoder"] = {{"type", "CTC"}};
  expect_error(j, "CTC");
  j = tiny();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  expect_error(j, "regex");
  j = tiny();
  j["model"]["merges"] = {"a zz"};
  expect_error(j, "merge");
  j = tiny();
  j["model"]["fuse_unk"] = "yes";  // wrong type: ignored like a missing flag
  EXPECT_EQ(make(j)->encode("zz"), V({6, 6}));
  j["added_tokens"] = {{{"id", "seven"}, {"content", "<x>"}}};
  expect_error(j, "tokenizer");
  EXPECT_THROW(Tokenizer::from_json(tiny().dump(), "{bad config"), Error);
  EXPECT_THROW(Tokenizer::from_json("{\"model\": "), Error);
  EXPECT_THROW(Tokenizer::from_json("not json"), Error);
  EXPECT_THROW(Tokenizer::from_dir("/nonexistent/dir"), Error);
}

TEST(TokenizerUnit, ByteLevelSplitPipeline) {
  // Byte-level BPE on the GPT-2 alphabet: bytes map to chars ("Ġ" = space).
  json vocab = json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[utf8::byte_to_unicode(static_cast<uint8_t>(b))] = id++;
  vocab["\xC4\xA0" "a"] = id++;  // "Ġa" = 256
  json j = tiny();
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"\xC4\xA0 a"}}};
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"}};
  auto t = make(j);
  // Ids follow byte order here, so byte 'a' (0x61) has id 97; the GPT-2 regex splits "a", " a".
  EXPECT_EQ(t->encode("a a"), V({97, 256}));
  EXPECT_EQ(t->encode("a\n"), V({97, 10}));
  std::string s = "x a\n\xE4\xBD\xA0";
  EXPECT_EQ(t->decode(t->encode(s)), s);
  EXPECT_EQ(stream(*t, t->encode(s)), s);
}

}  // namespace
}  // namespace nanovllm
