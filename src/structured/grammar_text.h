// Grammars written as text, compiled to a Grammar (grammar.h):
//
// GBNF (llama.cpp's `grammar`; also the EBNF dialect of vLLM's `structured_outputs.grammar` /
// `guided_grammar`, which xgrammar reads):
//   rule ::= alternatives          (the start rule is `root`; a rule ends where the next
//                                    `name ::=` begins, so rules may span lines)
//   "literal"  [a-z0-9_] [^"\\]  .  name  ( ... )  |  *  +  ?  {m}  {m,}  {m,n}  {,n}  # comment
//   escapes: \n \r \t \\ \" \[ \] \- \/ \xHH \uHHHH \UHHHHHHHH
// Lark (a subset, vLLM's other grammar syntax):
//   start: expansion   (`?rule` / `!rule` modifiers ignored), TERMINAL: expansion (TERM.2 priorities
//   ignored), "literal" "literal"i /regex/ "a".."z" name (x) [x] (optional) x? x* x+ x ~ n  x ~ n..m,
//   alternatives on following lines starting with `|`, // comments,
//   %import common.NAME (WS, WS_INLINE, NEWLINE, CR, LF, INT, SIGNED_INT, DECIMAL, FLOAT, NUMBER,
//   SIGNED_NUMBER, DIGIT, HEXDIGIT, LETTER, LCASE_LETTER, UCASE_LETTER, WORD, CNAME,
//   ESCAPED_STRING), %ignore NAME (the ignored terminal may appear between any two items of a
//   rule, as Lark's lexer skips it).
// Anything else (token references <...>, lookahead, %declare, templates, regex flags other than
// i on literals) is a ConstraintError naming it and its line; so are undefined and duplicate
// rules, a missing start rule, and left recursion (GrammarBuilder::finish).
#pragma once
#include <string_view>

#include "structured/grammar.h"

namespace nanovllm::structured {

Grammar gbnf_grammar(std::string_view text, size_t max_states = 200000);
Grammar lark_grammar(std::string_view text, size_t max_states = 200000);
// GBNF when the text defines a rule with `::=`, else Lark.
Grammar text_grammar(std::string_view text, size_t max_states = 200000);
bool looks_like_gbnf(std::string_view text);

}  // namespace nanovllm::structured
