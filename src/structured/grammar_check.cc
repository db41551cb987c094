// GrammarBuilder::finish: productivity and dead-state pruning (so that no reachable state is a
// dead end), and the left-recursion check (so that the pushdown automaton's closure terminates).
#include <algorithm>

#include "structured/grammar.h"

namespace nanovllm::structured {

namespace {

// Least fixpoint of "state s reaches its rule's end" using byte edges (when `bytes`), epsilons,
// and calls to rules in `ok_rule` (continuing at the return state). Returns per-state flags and
// sets ok_rule[r] for rules whose start qualifies (iterated together: rules call each other).
std::vector<char> reach_end(const Grammar& g, bool bytes, std::vector<char>& ok_rule) {
  size_t n = g.states.size();
  std::vector<char> reach(n, 0);
  for (auto& r : g.rules) reach[r.end] = 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t k = n; k-- > 0;) {  // edges mostly point forward: reverse order converges fast
      if (reach[k]) continue;
      const auto& st = g.states[k];
      bool ok = false;
      if (bytes)
        for (auto& e : st.bytes) ok = ok || reach[e.to];
      for (int32_t t : st.eps) ok = ok || reach[t];
      for (auto& c : st.calls) ok = ok || (ok_rule[c.rule] && reach[c.ret]);
      if (ok) {
        reach[k] = 1;
        changed = true;
      }
    }
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (!ok_rule[r] && reach[g.rules[r].start]) {
        ok_rule[r] = 1;
        changed = true;
      }
    }
  }
  return reach;
}

// A cycle in the "calls at a position reachable without consuming a byte" graph, as rule names.
std::string left_recursion(const Grammar& g, const std::vector<char>& nullable) {
  size_t nr = g.rules.size();
  std::vector<std::vector<int32_t>> left_calls(nr);
  std::vector<char> seen(g.states.size(), 0);
  for (size_t r = 0; r < nr; ++r) {
    std::vector<int32_t> todo{g.rules[r].start}, visited;
    while (!todo.empty()) {
      int32_t s = todo.back();
      todo.pop_back();
      if (seen[s]) continue;
      seen[s] = 1;
      visited.push_back(s);
      for (int32_t t : g.states[s].eps) todo.push_back(t);
      for (auto& c : g.states[s].calls) {
        left_calls[r].push_back(c.rule);
        if (nullable[c.rule]) todo.push_back(c.ret);
      }
    }
    for (int32_t s : visited) seen[s] = 0;
  }
  // Iterative DFS with colours: 1 = on the current path, 2 = done.
  std::vector<char> colour(nr, 0);
  std::vector<int32_t> path;
  std::vector<size_t> next_kid;
  for (size_t r0 = 0; r0 < nr; ++r0) {
    if (colour[r0]) continue;
    path = {static_cast<int32_t>(r0)};
    next_kid = {0};
    colour[r0] = 1;
    while (!path.empty()) {
      int32_t r = path.back();
      if (next_kid.back() == left_calls[r].size()) {
        colour[r] = 2;
        path.pop_back();
        next_kid.pop_back();
        continue;
      }
      int32_t c = left_calls[r][next_kid.back()++];
      if (colour[c] == 1) {
        std::string cycle;
        auto it = std::find(path.begin(), path.end(), c);
        for (; it != path.end(); ++it) cycle += "'" + g.rules[*it].name + "' -> ";
        return cycle + "'" + g.rules[c].name + "'";
      }
      if (colour[c] == 0) {
        colour[c] = 1;
        path.push_back(c);
        next_kid.push_back(0);
      }
    }
  }
  return "";
}

}  // namespace

Grammar GrammarBuilder::finish(int root) {
  Grammar g = std::move(g_);
  g_ = Grammar{};
  NV_CHECK(root >= 0 && root < static_cast<int>(g.rules.size()), "grammar root ", root);
  g.root = root;

  std::vector<char> productive(g.rules.size(), 0);
  std::vector<char> live = reach_end(g, true, productive);
  if (!productive[root])
    throw ConstraintError("the constraint matches no output at all (contradictory schema?)");
  for (auto& st : g.states) {
    std::erase_if(st.bytes, [&](const Grammar::ByteEdge& e) { return !live[e.to]; });
    std::erase_if(st.eps, [&](int32_t t) { return !live[t]; });
    std::erase_if(st.calls, [&](const Grammar::CallEdge& c) { return !productive[c.rule] || !live[c.ret]; });
  }

  std::vector<char> nullable(g.rules.size(), 0);
  reach_end(g, false, nullable);
  std::string cycle = left_recursion(g, nullable);
  if (!cycle.empty())
    throw ConstraintError("recursive definition that can repeat without producing any text: " + cycle +
                          " (a $ref cycle must pass through an object or array)");
  return g;
}

}  // namespace nanovllm::structured
