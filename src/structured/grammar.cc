// Expr constructors, Thompson-style emission of Exprs into rule NFAs, and the checks of
// GrammarBuilder::finish (productivity, dead-state pruning, left recursion).
#include "structured/grammar.h"

#include <functional>
#include <map>

namespace nanovllm::structured {

namespace {
ExprPtr make(Expr e) { return std::make_shared<const Expr>(std::move(e)); }
}  // namespace

ExprPtr empty_expr() { return make(Expr{}); }
ExprPtr never_expr() {
  Expr e;
  e.kind = Expr::Kind::Never;
  return make(std::move(e));
}
ExprPtr lit(std::string bytes) {
  Expr e;
  e.kind = Expr::Kind::Literal;
  e.text = std::move(bytes);
  return make(std::move(e));
}
ExprPtr chars(CodepointSet set) {
  Expr e;
  e.kind = set.empty() ? Expr::Kind::Never : Expr::Kind::Chars;
  e.chars = std::move(set);
  return make(std::move(e));
}
ExprPtr seq(std::vector<ExprPtr> kids) {
  if (kids.size() == 1) return kids[0];
  Expr e;
  e.kind = Expr::Kind::Seq;
  e.kids = std::move(kids);
  return make(std::move(e));
}
ExprPtr alt(std::vector<ExprPtr> kids) {
  if (kids.size() == 1) return kids[0];
  Expr e;
  e.kind = kids.empty() ? Expr::Kind::Never : Expr::Kind::Alt;
  e.kids = std::move(kids);
  return make(std::move(e));
}
ExprPtr repeat(ExprPtr kid, int min, int max) {
  NV_CHECK(min >= 0 && (max < 0 || max >= min), "repeat{", min, ",", max, "}");
  Expr e;
  e.kind = Expr::Kind::Repeat;
  e.kids = {std::move(kid)};
  e.min = min;
  e.max = max;
  return make(std::move(e));
}
ExprPtr call(int rule) {
  Expr e;
  e.kind = Expr::Kind::Call;
  e.rule = rule;
  return make(std::move(e));
}

size_t Grammar::num_edges() const {
  size_t n = 0;
  for (auto& s : states) n += s.bytes.size() + s.eps.size() + s.calls.size();
  return n;
}

int GrammarBuilder::add_rule(std::string name) {
  int r = static_cast<int>(g_.rules.size());
  g_.rules.push_back({std::move(name), -1, -1});
  g_.rules[r].start = new_state(r);
  g_.rules[r].end = new_state(r);
  return r;
}

void GrammarBuilder::define(int rule, const Expr& body) {
  emit(body, g_.rules[rule].start, g_.rules[rule].end);
}

int GrammarBuilder::new_state(int rule) {
  if (g_.states.size() >= max_states_)
    throw ConstraintError("constraint too large: more than " + std::to_string(max_states_) +
                          " automaton states (very large maxLength, maxItems or {n,m} counts?)");
  g_.states.emplace_back();
  g_.rule_of.push_back(rule);
  return static_cast<int>(g_.states.size()) - 1;
}

void GrammarBuilder::eps(int from, int to) { g_.states[from].eps.push_back(to); }

void GrammarBuilder::byte_edge(int from, uint8_t lo, uint8_t hi, int to) { g_.states[from].bytes.push_back({lo, hi, to}); }

// Invariant of every emit(e, from, to): it adds out-edges to `from`, in-edges to `to` and fresh
// states in between, never an edge into `from`; so fragments emitted between the same pair of
// states form an alternation, and chaining fragments through fresh states a sequence.
void GrammarBuilder::emit(const Expr& e, int from, int to) {
  int rule = g_.rule_of[from];
  switch (e.kind) {
    case Expr::Kind::Empty:
      eps(from, to);
      return;
    case Expr::Kind::Never:
      return;
    case Expr::Kind::Literal: {
      if (e.text.empty()) return eps(from, to);
      int cur = from;
      for (size_t i = 0; i < e.text.size(); ++i) {
        int nxt = i + 1 == e.text.size() ? to : new_state(rule);
        uint8_t b = static_cast<uint8_t>(e.text[i]);
        g_.states[cur].bytes.push_back({b, b, nxt});
        cur = nxt;
      }
      return;
    }
    case Expr::Kind::Chars:
      return emit_chars(e.chars, from, to);
    case Expr::Kind::Seq: {
      if (e.kids.empty()) return eps(from, to);
      int cur = from;
      for (size_t i = 0; i + 1 < e.kids.size(); ++i) {
        int m = new_state(rule);
        emit(*e.kids[i], cur, m);
        cur = m;
      }
      return emit(*e.kids.back(), cur, to);
    }
    case Expr::Kind::Alt:
      for (auto& k : e.kids) emit(*k, from, to);
      return;
    case Expr::Kind::Repeat: {
      const Expr& kid = *e.kids[0];
      if (e.max == e.min) {
        if (e.min == 0) return eps(from, to);
        int cur = from;
        for (int i = 0; i < e.min; ++i) {
          int nxt = i + 1 == e.min ? to : new_state(rule);
          emit(kid, cur, nxt);
          cur = nxt;
        }
        return;
      }
      int cur = from;
      for (int i = 0; i < e.min; ++i) {
        int nxt = new_state(rule);
        emit(kid, cur, nxt);
        cur = nxt;
      }
      if (e.max < 0) {
        int loop = new_state(rule);
        eps(cur, loop);
        emit(kid, loop, loop);
        eps(loop, to);
        return;
      }
      int optional = e.max - e.min;
      for (int i = 0; i < optional; ++i) {
        eps(cur, to);
        int nxt = i + 1 == optional ? to : new_state(rule);
        emit(kid, cur, nxt);
        cur = nxt;
      }
      return;
    }
    case Expr::Kind::Call:
      NV_CHECK(e.rule >= 0 && e.rule < static_cast<int>(g_.rules.size()), "call of unknown rule ", e.rule);
      g_.states[from].calls.push_back({e.rule, to});
      return;
  }
}

// Each UTF-8 sequence r1..rn becomes from -r1-> S(r2..rn); S(suffix) is shared between
// sequences with the same suffix (e.g. all "[80-BF][80-BF]" tails), keeping classes compact.
void GrammarBuilder::emit_chars(const CodepointSet& set, int from, int to) {
  int rule = g_.rule_of[from];
  std::map<std::vector<ByteRange>, int> suffix_state;
  std::function<int(const std::vector<ByteRange>&, size_t)> state_for = [&](const std::vector<ByteRange>& s,
                                                                            size_t k) -> int {
    if (k == s.size()) return to;
    std::vector<ByteRange> key(s.begin() + static_cast<long>(k), s.end());
    auto it = suffix_state.find(key);
    if (it != suffix_state.end()) return it->second;
    int st = new_state(rule);
    int nxt = state_for(s, k + 1);
    g_.states[st].bytes.push_back({s[k].first, s[k].second, nxt});
    suffix_state.emplace(std::move(key), st);
    return st;
  };
  for (auto& s : utf8_sequences(set)) {
    int nxt = state_for(s, 1);
    g_.states[from].bytes.push_back({s[0].first, s[0].second, nxt});
  }
}

}  // namespace nanovllm::structured
