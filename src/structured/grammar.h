// The grammar every constraint compiles to: a set of rules, each a byte-level NFA whose edges
// are byte ranges, epsilons, or calls to other rules (a recursive transition network, i.e. a
// context-free grammar over bytes). Regexes, JSON schemas and choices are built from Exprs
// (regex-like trees) emitted into rule NFAs by GrammarBuilder; GrammarBuilder::finish checks
// that the result can be run as a pushdown automaton (pda.h).
#pragma once
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "structured/codepoints.h"
#include "util/check.h"

namespace nanovllm::structured {

// A constraint the engine cannot honour (unsupported schema keyword, bad regex, contradictory
// schema): the message names it and is meant for the client (the server answers 400).
class ConstraintError : public Error {
 public:
  using Error::Error;
};

// ---- Expr: a regex-like tree over code points and bytes. Immutable, shared. ----
struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;
struct Expr {
  enum class Kind : uint8_t { Empty, Never, Literal, Chars, Seq, Alt, Repeat, Call };
  Kind kind = Kind::Empty;
  std::string text;           // Literal: raw bytes
  CodepointSet chars;         // Chars: one code point of this set, UTF-8 encoded
  std::vector<ExprPtr> kids;  // Seq, Alt, Repeat (one kid)
  int min = 0, max = 0;       // Repeat: max < 0 = unbounded
  int rule = -1;              // Call
};
ExprPtr empty_expr();                 // matches ""
ExprPtr never_expr();                 // matches nothing
ExprPtr lit(std::string bytes);
ExprPtr chars(CodepointSet set);
ExprPtr seq(std::vector<ExprPtr> kids);
ExprPtr alt(std::vector<ExprPtr> kids);
ExprPtr repeat(ExprPtr kid, int min, int max);  // max < 0: unbounded
inline ExprPtr opt(ExprPtr e) { return repeat(std::move(e), 0, 1); }
inline ExprPtr star(ExprPtr e) { return repeat(std::move(e), 0, -1); }
ExprPtr call(int rule);

// ---- Grammar: the compiled NFAs. States are global; each belongs to one rule. ----
struct Grammar {
  struct ByteEdge {
    uint8_t lo, hi;  // inclusive
    int32_t to;
  };
  struct CallEdge {
    int32_t rule;  // callee
    int32_t ret;   // state to continue at when the callee ends
  };
  struct State {
    std::vector<ByteEdge> bytes;
    std::vector<int32_t> eps;
    std::vector<CallEdge> calls;
  };
  struct Rule {
    std::string name;
    int32_t start = -1, end = -1;  // `end` has no outgoing edges: reaching it ends the rule
  };
  std::vector<State> states;
  std::vector<int32_t> rule_of;  // state -> rule
  std::vector<Rule> rules;
  int32_t root = -1;

  bool is_end(int32_t s) const { return rules[rule_of[s]].end == s; }
  size_t num_edges() const;
};

class GrammarBuilder {
 public:
  explicit GrammarBuilder(size_t max_states = 200000) : max_states_(max_states) {}
  int add_rule(std::string name);  // reserves a rule; define it (now or later) with define()
  void define(int rule, const Expr& body);
  int rule_start(int rule) const { return g_.rules[rule].start; }
  int rule_end(int rule) const { return g_.rules[rule].end; }
  // Lower level, for bodies built by hand: a new state of `rule`, an epsilon, an Expr between two
  // existing states of the same rule (adds out-edges to `from`, in-edges to `to`, new states
  // between).
  int new_state(int rule);
  void eps(int from, int to);
  void emit(const Expr& e, int from, int to);
  // One edge from -> to on any byte in [lo, hi] (raw bytes, not code points).
  void byte_edge(int from, uint8_t lo, uint8_t hi, int to);

  // Validates and returns the grammar with `root` as start rule. Throws ConstraintError when
  // the root matches nothing, or a rule can call itself without consuming a byte (left
  // recursion: the pushdown automaton would not terminate). A rule never defined matches
  // nothing. Removes dead parts (states that
  // cannot reach their rule's end, calls to rules that match nothing), so every reachable
  // state can still complete: the matcher never gets stuck.
  Grammar finish(int root);

 private:
  void emit_chars(const CodepointSet& set, int from, int to);
  Grammar g_;
  size_t max_states_;
};

}  // namespace nanovllm::structured
