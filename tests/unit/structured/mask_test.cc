// Token masks against brute force: at every step of random walks, bit t of the mask equals
// "the automaton accepts token t's bytes now" (GrammarMatcher::is_allowed), EOS bits equal
// can_end(), ids without text are never set. Plus the token trie and token bytes.
#include <random>

#include "structured/grammar_cache.h"
#include "structured/json_schema.h"
#include "tokenizer/incremental.h"
#include "test_util.h"

namespace nanovllm::structured {
namespace {

using testing::allowed_ids;
using testing::byte_vocab;

// A vocabulary shaped like a real one for JSON: bytes, then random strings over JSON-ish
// characters (so that tokens straddle rule ends: `",`, `}]`, `1,"`...), multi-byte UTF-8 and
// partial UTF-8 sequences.
std::shared_ptr<const TokenIndex> json_ish_vocab(uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> pieces = {"\"", "{", "}", "[", "]", ",", ":", " ", "\n", "a", "b", "1", "0", "-", ".",
                                           "e", "\\", "n", "u", "true", "null", "é", "\xE2\x82", "\xAC", "x", "_"};
  std::vector<std::string> extra;
  for (int i = 0; i < 1500; ++i) {
    std::string t;
    int len = 2 + static_cast<int>(rng() % 5);
    for (int k = 0; k < len; ++k) t += pieces[rng() % pieces.size()];
    extra.push_back(t);
  }
  extra.push_back("\"a\"");
  extra.push_back("\"a\"");  // a duplicate byte string
  return byte_vocab(extra);
}

void check_walks(const std::shared_ptr<const CompiledGrammar>& g, int walks, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  const TokenIndex& v = g->vocab();
  int checked = 0;
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(g);
    for (int s = 0; s < steps; ++s) {
      std::vector<uint32_t> mask = m.next_token_bitmask();
      ASSERT_EQ(mask.size(), static_cast<size_t>(v.mask_words()));
      for (int32_t id = 0; id < v.mask_words() * 32; ++id) {
        bool bit = (mask[id >> 5] >> (id & 31)) & 1u;
        bool want = id < v.vocab_size() && m.is_allowed(id);
        ASSERT_EQ(bit, want) << "token " << id << " '" << v.bytes(id) << "' at walk " << w << " step " << s;
      }
      for (int32_t e : v.eos_ids()) ASSERT_EQ(m.can_end(), static_cast<bool>((mask[e >> 5] >> (e & 31)) & 1u));
      ++checked;
      std::vector<int32_t> ids = allowed_ids(mask);
      ASSERT_FALSE(ids.empty()) << "stuck";
      int32_t pick = ids[rng() % ids.size()];
      if (v.is_eos(pick)) break;
      ASSERT_TRUE(m.accept_token(pick));
    }
  }
  EXPECT_GT(checked, walks);
}

TEST(Masks, MatchBruteForceOnSyntheticVocab) {
  auto vocab = json_ish_vocab(1);
  check_walks(compile(json_object_grammar(), vocab), 6, 60, 11);
  const char* s = R"({"type":"object","properties":{"name":{"type":"string","maxLength":5},"tags":{"type":"array",
      "items":{"enum":["a","b\"c",null]},"maxItems":3},"n":{"type":"number","minimum":-1,"maximum":1},
      "x":{"anyOf":[{"type":"integer"},{"type":"object","properties":{"y":{"type":"boolean"}}}]}},
      "required":["name","n"],"additionalProperties":false})";
  check_walks(compile(json_schema_grammar(parse_json_schema(s)), vocab), 6, 60, 12);
  check_walks(compile(regex_grammar("(a|b\"|é)*[0-9]{2,4}(\\.[a-z]+)?"), vocab), 6, 30, 13);
  check_walks(compile(choice_grammar({"true", "null", "true null", "é"}), vocab), 4, 10, 14);
}

TEST(Masks, SharedGrammarAcrossMatchers) {
  // Two matchers on one CompiledGrammar see the same masks in the same states.
  auto g = compile(json_object_grammar(), json_ish_vocab(2));
  GrammarMatcher a(g), b(g);
  for (std::string text : {"{\"k\":", " [1, \"x", "é\"]"}) {
    ASSERT_TRUE(a.accept_bytes(text));
    ASSERT_TRUE(b.accept_bytes(text));
    EXPECT_EQ(a.next_token_bitmask(), b.next_token_bitmask());
  }
  EXPECT_GT(g->stats().positions, 0u);
  // Precomputed tables give the same masks.
  auto pre = compile(json_object_grammar(), json_ish_vocab(2));
  EXPECT_GT(pre->precompute(), 10u);
  GrammarMatcher c(pre);
  ASSERT_TRUE(c.accept_bytes("{\"k\": [1, \"xé\"]"));
  EXPECT_EQ(c.next_token_bitmask(), a.next_token_bitmask());
}

TEST(GrammarCache, SharesAndEvicts) {
  GrammarCache cache(byte_vocab(), 2);
  int builds = 0;
  auto build = [&](const std::string& c) {
    return [&builds, c] {
      ++builds;
      return choice_grammar({c});
    };
  };
  auto a = cache.get("a", build("a"));
  EXPECT_EQ(cache.get("a", build("a")), a);
  cache.get("b", build("b"));
  cache.get("c", build("c"));  // evicts "a" (least recently used)
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_NE(cache.get("a", build("a")), a);
  EXPECT_EQ(builds, 4);
  EXPECT_THROW(cache.get("bad", [] { return regex_grammar("(a"); }), ConstraintError);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(Masks, TerminationAndEos) {
  auto vocab = byte_vocab();
  int32_t eos = vocab->eos_ids()[0];
  GrammarMatcher m(compile(choice_grammar({"ab"}), vocab));
  EXPECT_FALSE(m.accept_token(eos));
  EXPECT_FALSE(m.accept_token('b'));
  EXPECT_TRUE(m.accept_token('a'));
  EXPECT_TRUE(m.accept_token('b'));
  EXPECT_TRUE(m.must_end());
  EXPECT_EQ(allowed_ids(m.next_token_bitmask()), std::vector<int32_t>{eos});
  EXPECT_TRUE(m.accept_token(eos));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token('a'));
  EXPECT_EQ(allowed_ids(m.next_token_bitmask()), std::vector<int32_t>{eos});
  m.reset();
  EXPECT_EQ(allowed_ids(m.next_token_bitmask()), std::vector<int32_t>{'a'});
}

TEST(TokenIndex, TrieHoldsEveryTokenOnce) {
  auto v = json_ish_vocab(3);
  const auto& nodes = v->nodes();
  std::vector<int> seen(v->vocab_size(), 0);
  std::vector<std::string> path(v->max_token_bytes() + 1);
  for (size_t i = 1; i < nodes.size(); ++i) {
    path[nodes[i].depth] = path[nodes[i].depth - 1] + static_cast<char>(nodes[i].byte);
    ASSERT_GT(nodes[i].end, static_cast<int32_t>(i));
    for (int32_t k = nodes[i].tok_begin; k < nodes[i].tok_end; ++k) {
      int32_t t = v->tokens()[k];
      EXPECT_EQ(v->bytes(t), path[nodes[i].depth]);
      ++seen[t];
    }
  }
  for (int32_t id = 0; id < v->vocab_size(); ++id) EXPECT_EQ(seen[id], v->in_trie(id) ? 1 : 0) << id;
  EXPECT_FALSE(v->in_trie(v->eos_ids()[0]));
}

// The bytes of a decoded sequence are the concatenation of its tokens' bytes (what the grammar
// sees is what the client receives), for byte-level and SentencePiece tokenizers.
TEST(TokenIndex, SharedDataTokenBytesConcatenateToDecodedText) {
  const std::vector<std::string> dirs = {"/tokenizers/qwen3", "/tokenizers/llama2-hf-generated", "/models/stories260K-hf"};
  const std::vector<std::string> texts = {"Hello world", " {\"a\": [1, 2.5e3], \"b\": \"x\\n\"}", "naïve café 東京 🙂",
                                          "  leading spaces\n\tand tabs", "Once upon a time, there was"};
  int tested = 0;
  for (auto& d : dirs) {
    std::string dir = testing::shared_data() + d;
    if (!std::ifstream(dir + "/tokenizer.json").good()) continue;
    auto tok = Tokenizer::from_dir(dir);
    std::vector<int> prompt = tok->encode("x", false);
    for (auto& t : texts) {
      std::vector<int> ids = tok->encode(t, false);
      IncrementalDetokenizer detok(*tok, false, prompt);
      std::string streamed, concat;
      for (int id : ids) {
        streamed += detok.push(id);
        concat += tok->token_bytes(id);
      }
      streamed += detok.finish();
      EXPECT_EQ(concat, streamed) << d << ": " << t;
      ++tested;
    }
  }
  if (!tested) GTEST_SKIP() << "no tokenizers in " << testing::shared_data();
}

TEST(Masks, SharedDataQwen3MatchesBruteForce) {
  if (!testing::have_qwen3()) GTEST_SKIP() << "no Qwen3 tokenizer in " << testing::shared_data();
  auto vocab = testing::qwen3_vocab();
  EXPECT_EQ(vocab->mask_words(), (151936 + 31) / 32);
  EXPECT_FALSE(vocab->in_trie(151644));  // <|im_start|> (special)
  EXPECT_TRUE(vocab->in_trie(151657));   // <tool_call> (plain added token)
  check_walks(compile(json_object_grammar(), vocab), 2, 12, 21);
  const char* s = R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,
      "maximum":14},"units":{"enum":["metric","imperial"]}},"required":["city","days","units"]})";
  check_walks(compile(json_schema_grammar(parse_json_schema(s)), vocab), 2, 12, 22);
}

}  // namespace
}  // namespace nanovllm::structured
