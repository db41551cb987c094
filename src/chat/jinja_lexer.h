// Jinja lexer: splits a template into text and tag tokens, applying jinja2's whitespace control
// exactly as transformers configures it (trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False): `{%-`/`-%}` strip whitespace, `{%+`/`+%}` disable lstrip/trim,
// a block or comment tag alone on its line loses its leading indentation, and the newline right
// after a block/comment tag is dropped. Comments vanish; {% raw %} bodies become text.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nanovllm::jinja {

enum class Tok : uint8_t {
  Text,        // literal template text (already whitespace-processed)
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,
  Int,
  Float,
  Op,  // operators and punctuation: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  Eof,
};

struct Token {
  Tok type;
  std::string text;  // Text contents, name, decoded string literal, or operator spelling
  int64_t ival = 0;
  double fval = 0;
  int line = 1;
};

// Throws nanovllm::Error naming the line on malformed input (unterminated tag/string, bad char).
std::vector<Token> tokenize(const std::string& source);

}  // namespace nanovllm::jinja
