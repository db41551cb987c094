// Grammars as text (GBNF / EBNF and a Lark subset): the language each compiles to equals the
// intended one on every short string (a regex checked by PCRE2, or a hand-written recognizer
// for the recursive ones), documents sampled from a JSON grammar parse as JSON, and every
// unsupported or broken construct is a ConstraintError naming it and its line.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "structured/grammar_text.h"
#include "test_util.h"

namespace nanovllm::structured {
namespace {

using testing::byte_vocab;
using testing::full_match;

bool pcre2_full(const std::string& pattern, const std::string& text) {
  int err;
  PCRE2_SIZE off;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                                 PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &err, &off, nullptr);
  EXPECT_NE(re, nullptr) << pattern;
  if (!re) return false;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  const int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(text.c_str()), text.size(), 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  pcre2_code_free(re);
  return rc >= 0;
}

std::vector<std::string> all_strings(const std::vector<std::string>& alphabet, int max_len) {
  std::vector<std::string> out{""}, layer{""};
  for (int l = 0; l < max_len; ++l) {
    std::vector<std::string> next;
    for (auto& s : layer)
      for (auto& a : alphabet) next.push_back(s + a);
    out.insert(out.end(), next.begin(), next.end());
    layer.swap(next);
  }
  return out;
}

void expect_language(const Grammar& g, const std::function<bool(const std::string&)>& want,
                     const std::vector<std::string>& alphabet, int max_len, const std::string& what) {
  auto compiled = compile(g, byte_vocab());
  int checked = 0;
  for (const auto& s : all_strings(alphabet, max_len)) {
    EXPECT_EQ(full_match(compiled, s), want(s)) << what << " on '" << s << "'";
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST(GrammarText, GbnfSameLanguageAsRegex) {
  const std::pair<const char*, const char*> cases[] = {
      {"root ::= (\"a\" | \"b\")* \"c\"", "(a|b)*c"},
      {"root ::= x y?\nx ::= [a-b]+\ny ::= \"c\"{1,2}", "[ab]+(c{1,2})?"},
      {"# a comment\nroot ::= \"a\"\n  | \"b\" c   # alternatives across lines\nc ::= [^ab\\n]", "a|b[^ab\\n]"},
      {"root ::= . \"\\x61\" \"\\u00e9\"?", "(?s).a(é)?"},  // `.` is any character, newline too
      {"root ::= \"a\"{2,} | \"b\"{,1} \"c\"{0}", "a{2,}|b?"},
      {"root ::= [\\-\\]a]+", "[\\-\\]a]+"},
      {"root ::= (\"a\" (\"b\" | \"\")){1,2} \"\"", "(ab?){1,2}"},
      {"root   ::=   item+\nitem ::= \"a\" | \"\\\"\" ", "(a|\")+"},
  };
  for (const auto& [gbnf, regex] : cases)
    expect_language(gbnf_grammar(gbnf), [&](const std::string& s) { return pcre2_full(regex, s); },
                    {"a", "b", "c", "é", "\"", "-", "]", "\n"}, 4, gbnf);
}

// Balanced parentheses: recursion, which no regex can check.
bool balanced(const std::string& s) {
  int depth = 0;
  for (char c : s) {
    depth += c == '(' ? 1 : c == ')' ? -1 : 100000;
    if (depth < 0 || depth > 1000) return false;
  }
  return depth == 0;
}

TEST(GrammarText, RecursiveRules) {
  expect_language(gbnf_grammar("root ::= (\"(\" root \")\")*"), balanced, {"(", ")", "x"}, 8, "gbnf parens");
  expect_language(lark_grammar("start: pair*\npair: \"(\" start \")\""), balanced, {"(", ")", "x"}, 8, "lark parens");
}

TEST(GrammarText, LarkSameLanguageAsRegex) {
  const std::pair<const char*, const char*> cases[] = {
      {"start: \"a\"+ B\nB: /b?c/", "a+b?c"},
      {"?start: x\n    | y \"c\"\n!x: [\"a\"] \"b\"   // optional a\ny: \"a\"..\"b\" ~ 2", "a?b|[ab]{2}c"},
      {"start: WORD \".\" NUM\n%import common.WORD\nNUM.2: DIGIT ~ 1..2\n%import common.DIGIT", "[a-zA-Z]+\\.[0-9]{1,2}"},
      {"start: \"ab\"i", "[aA][bB]"},
      {"start: (A | B)* A\nA: \"a\"\nB: \"b\"", "(a|b)*a"},
  };
  for (const auto& [lark, regex] : cases)
    expect_language(lark_grammar(lark), [&](const std::string& s) { return pcre2_full(regex, s); },
                    {"a", "b", "c", "A", "B", ".", "1", " "}, 4, lark);
}

TEST(GrammarText, LarkIgnoreAllowsTheTerminalBetweenItems) {
  const Grammar g = lark_grammar("start: \"x\" pair\npair: \"y\" \"z\"\nWS: /[ ]+/\n%ignore WS");
  // Spaces between any two tokens and around the whole text, never inside a terminal.
  expect_language(g, [](const std::string& s) { return pcre2_full(" *x *y *z *", s); }, {"x", "y", "z", " "}, 6,
                  "ignore");
  const Grammar t = lark_grammar("start: NAME\nNAME: \"a\" \"b\"\n%import common.WS\n%ignore WS");
  auto c = compile(t, byte_vocab());
  EXPECT_TRUE(full_match(c, " ab "));
  EXPECT_FALSE(full_match(c, "a b"));  // a terminal is one token
}

TEST(GrammarText, TextPicksTheSyntax) {
  EXPECT_TRUE(looks_like_gbnf("root ::= \"a\""));
  EXPECT_FALSE(looks_like_gbnf("start: \"a\""));
  auto g = compile(text_grammar("start: \"a\""), byte_vocab());
  EXPECT_TRUE(full_match(g, "a"));
  auto h = compile(text_grammar("root ::= \"b\""), byte_vocab());
  EXPECT_TRUE(full_match(h, "b"));
}

// A JSON grammar in GBNF (written here from RFC 8259, bounded whitespace so that a random walk
// ends): every sampled document parses as JSON.
TEST(GrammarText, SampledJsonDocumentsParse) {
  const char* json_gbnf = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ws ("," ws string ws ":" ws value ws){0,3} )? "}"
array  ::= "[" ws ( value ws ("," ws value ws){0,3} )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) ){0,8} "\""
number ::= "-"? ([0-9] | [1-9] [0-9]{1,5}) ("." [0-9]{1,4})? ([eE] [-+]? [0-9]{1,2})?
ws     ::= [ \t\n]{0,2}
)";
  auto g = compile(gbnf_grammar(json_gbnf), byte_vocab());
  std::mt19937 rng(7);
  int finished = 0;
  for (int i = 0; i < 60; ++i) {
    testing::Sampled s = testing::sample_document(g, rng, 3000, 40);
    if (!s.finished) continue;
    ++finished;
    EXPECT_FALSE(nlohmann::json::parse(s.text, nullptr, false).is_discarded()) << s.text;
  }
  EXPECT_GT(finished, 40);
}

TEST(GrammarText, ErrorsNameTheProblemAndLine) {
  const std::pair<const char*, const char*> gbnf[] = {
      {"", "the grammar is empty"},
      {"root ::= \"a\"\nx ::= y", "line 2: rule 'y' is used but never defined"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2: rule 'root' is defined twice"},
      {"main ::= \"a\"", "no 'root' rule"},
      {"root ::= <think> \"a\"", "token references (<...>) are not supported"},
      {"root ::= (= \"a\") \"a\"", "lookahead assertions"},
      {"root ::= \"\\q\"", "unknown escape \\q"},
      {"root ::= \"abc", "unterminated string literal"},
      {"root ::= [b-a]", "character range out of order"},
      {"root ::= \"a\"{3,2}", "n < m"},
      {"root ::= \"a\"{1000000}", "over 100000"},
      {"root ::= root \"a\" | \"b\"", "recurs"},
      {"root = \"a\"", "expected '::='"},
      {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
  };
  for (const auto& [text, want] : gbnf) {
    try {
      (void)gbnf_grammar(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConstraintError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << text << " -> " << e.what();
    }
  }
  const std::pair<const char*, const char*> lark[] = {
      {"rule: \"a\"", "no 'start' rule"},
      {"start: x", "'x' is used but never defined"},
      {"start: \"a\"\n%ignore WS", "%ignore names 'WS'"},
      {"start: /a/i", "regex flags"},
      {"start: \"a\"\n%declare X", "%declare is not supported"},
      {"start: \"a\"\n%import other.X", "only '%import common.NAME'"},
      {"start: \"a\"\n%import common.NOPE", "'common.NOPE' is not one of"},
      {"start: x -> alias\nx: \"a\"", "aliases"},
      {"start: A\nA: b\nb: \"x\"", "terminal definitions may only use terminals"},
      {"start: /(?=a)a/", "lookaround"},
      {"start: \"a\"\nstart: \"b\"", "defined twice"},
  };
  // Nesting is bounded before it can exhaust the stack.
  const std::string deep_gbnf = "root ::= " + std::string(101, '(') + "\"a\"" + std::string(101, ')');
  const std::string deep_lark = "start: " + std::string(101, '(') + "\"a\"" + std::string(101, ')');
  EXPECT_THROW(
      {
        try {
          (void)gbnf_grammar(deep_gbnf);
        } catch (const ConstraintError& e) {
          EXPECT_NE(std::string(e.what()).find("nested deeper than 100"), std::string::npos) << e.what();
          throw;
        }
      },
      ConstraintError);
  EXPECT_THROW((void)lark_grammar(deep_lark), ConstraintError);
  EXPECT_NO_THROW((void)gbnf_grammar("root ::= " + std::string(50, '(') + "\"a\"" + std::string(50, ')')));
  for (const auto& [text, want] : lark) {
    try {
      (void)lark_grammar(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConstraintError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << text << " -> " << e.what();
    }
  }
}

}  // namespace
}  // namespace nanovllm::structured
