#include "structured/constraints.h"

#include "structured/regex.h"

namespace nanovllm::structured {

Grammar regex_grammar(std::string_view pattern, size_t max_states) {
  GrammarBuilder b(max_states);
  int r = b.add_rule("regex");
  b.define(r, *regex_expr(pattern));
  return b.finish(r);
}

Grammar choice_grammar(const std::vector<std::string>& choices) {
  if (choices.empty()) throw ConstraintError("choice: the list of choices is empty");
  std::vector<ExprPtr> kids;
  for (auto& c : choices) kids.push_back(lit(c));
  GrammarBuilder b;
  int r = b.add_rule("choice");
  b.define(r, *alt(std::move(kids)));
  return b.finish(r);
}

}  // namespace nanovllm::structured
