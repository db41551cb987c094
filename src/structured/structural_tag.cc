#include "structured/structural_tag.h"

#include <array>
#include <deque>
#include <map>

namespace nanovllm::structured {

using ojson = nlohmann::ordered_json;

namespace {

[[noreturn]] void bad(const std::string& what) { throw ConstraintError("structural_tag: " + what); }

std::string string_of(const ojson& o, const char* key, const std::string& where) {
  if (!o.contains(key) || !o[key].is_string()) bad(where + "." + key + " must be a string");
  return o[key].get<std::string>();
}

// The triggers' Aho-Corasick automaton: goto over all 256 bytes, and per node the triggers
// that end there (its own word and those of its suffix links).
struct AhoCorasick {
  std::vector<std::array<int, 256>> next;
  std::vector<std::vector<int>> out;  // trigger indices ending at the node

  explicit AhoCorasick(const std::vector<std::string>& words) {
    next.push_back({});
    next[0].fill(-1);
    out.emplace_back();
    for (size_t w = 0; w < words.size(); ++w) {
      int s = 0;
      for (unsigned char c : words[w]) {
        if (next[size_t(s)][c] < 0) {
          next[size_t(s)][c] = int(next.size());
          next.push_back({});
          next.back().fill(-1);
          out.emplace_back();
        }
        s = next[size_t(s)][c];
      }
      out[size_t(s)].push_back(int(w));
    }
    // BFS: failure links turn the trie into a full goto function.
    std::vector<int> fail(next.size(), 0);
    std::deque<int> q;
    for (int c = 0; c < 256; ++c) {
      int& t = next[0][size_t(c)];
      if (t < 0) t = 0;
      else q.push_back(t);
    }
    while (!q.empty()) {
      const int s = q.front();
      q.pop_front();
      for (int w : out[size_t(fail[size_t(s)])]) out[size_t(s)].push_back(w);
      for (int c = 0; c < 256; ++c) {
        int& t = next[size_t(s)][size_t(c)];
        if (t < 0) {
          t = next[size_t(fail[size_t(s)])][size_t(c)];
        } else {
          fail[size_t(t)] = next[size_t(fail[size_t(s)])][size_t(c)];
          q.push_back(t);
        }
      }
    }
  }
};

}  // namespace

Grammar structural_tag_grammar(const ojson& spec, const JsonSchemaOptions& opt) {
  if (!spec.is_object()) bad("expected an object with \"structures\" and \"triggers\"");
  if (!spec.contains("triggers") || !spec["triggers"].is_array() || spec["triggers"].empty())
    bad("\"triggers\" must be a non-empty list of strings");
  if (!spec.contains("structures") || !spec["structures"].is_array() || spec["structures"].empty())
    bad("\"structures\" must be a non-empty list of {begin, schema, end}");
  std::vector<std::string> triggers;
  for (const auto& t : spec["triggers"]) {
    if (!t.is_string() || t.get<std::string>().empty()) bad("every trigger must be a non-empty string");
    triggers.push_back(t.get<std::string>());
  }
  if (triggers.size() > 64) bad("at most 64 triggers");
  GrammarBuilder b(opt.max_states);
  const int root = b.add_rule("structural_tag");
  // One rule per trigger: the rest of a structure after the trigger's bytes.
  std::vector<std::vector<ExprPtr>> after(triggers.size());
  for (size_t k = 0; k < spec["structures"].size(); ++k) {
    const ojson& s = spec["structures"][k];
    const std::string w = "structures[" + std::to_string(k) + "]";
    if (!s.is_object()) bad(w + " must be an object");
    const std::string begin = string_of(s, "begin", w), end = string_of(s, "end", w);
    if (!s.contains("schema")) bad(w + ".schema is required");
    const int json_rule = add_json_schema_rule(b, s["schema"], opt);
    bool any = false;
    for (size_t t = 0; t < triggers.size(); ++t) {
      if (begin.compare(0, triggers[t].size(), triggers[t]) != 0) continue;
      any = true;
      after[t].push_back(seq({lit(begin.substr(triggers[t].size())), call(json_rule), lit(end)}));
    }
    if (!any) bad(w + ".begin '" + begin + "' starts with none of the triggers");
  }
  std::vector<int> after_rule(triggers.size());
  for (size_t t = 0; t < triggers.size(); ++t) {
    if (after[t].empty()) bad("trigger '" + triggers[t] + "' begins no structure");
    after_rule[t] = b.add_rule("after_" + std::to_string(t));
    b.define(after_rule[t], *alt(after[t]));
  }
  // Free text: a state per automaton node that matched no trigger; a byte that completes one
  // goes to a state that must continue as a structure of that trigger, then free text again.
  const AhoCorasick ac(triggers);
  const size_t n = ac.next.size();
  std::vector<int> st(n, -1), tag(n, -1);
  for (size_t s = 0; s < n; ++s) {
    if (!ac.out[s].empty()) {
      tag[s] = b.new_state(root);
    } else {
      st[s] = b.new_state(root);
      b.eps(st[s], b.rule_end(root));  // the output may end in free text
    }
  }
  b.eps(b.rule_start(root), st[0]);
  for (size_t s = 0; s < n; ++s) {
    if (st[s] < 0) continue;
    int lo = 0;
    for (int c = 1; c <= 256; ++c) {
      const int a = ac.next[s][size_t(lo)];
      if (c < 256 && ac.next[s][size_t(c)] == a) continue;
      const int to = st[size_t(a)] >= 0 ? st[size_t(a)] : tag[size_t(a)];
      b.byte_edge(st[s], uint8_t(lo), uint8_t(c - 1), to);
      lo = c;
    }
  }
  for (size_t s = 0; s < n; ++s)
    if (tag[s] >= 0)
      for (int t : ac.out[s]) b.emit(*call(after_rule[size_t(t)]), tag[s], st[0]);
  return b.finish(root);
}

}  // namespace nanovllm::structured
