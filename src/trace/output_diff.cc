#include "trace/output_diff.h"

#include <algorithm>
#include <deque>
#include <map>

namespace nanovllm::trace {

namespace {

// What a request asks, the seed left out (an unseeded request gets a new one per run).
std::string request_key(const RecordedRequest& r) {
  nlohmann::json p = r.params;
  p.erase("seed");
  std::string k = r.route + "\n" + p.dump() + "\n";
  for (int t : r.prompt_token_ids) k += std::to_string(t) + ",";
  return k;
}

void compare_pair(const RecordedOutput* a, const RecordedOutput* b, bool reproducible,
                  OutputPair& p) {
  if (a) p.a_finish = a->finish_reason, p.a_tokens = int(a->token_ids.size()), p.a_text = a->text;
  if (b) p.b_finish = b->finish_reason, p.b_tokens = int(b->token_ids.size()), p.b_text = b->text;
  if (!a || !b) {
    p.status = OutputStatus::kNotCompared;
    p.note = std::string("no output in ") + (!a ? "A" : "B") + " (unfinished when the trace ended)";
    return;
  }
  if (!reproducible) {
    p.status = OutputStatus::kNotCompared;
    p.note = "sampled with different seeds (none was given: each run drew its own)";
    return;
  }
  p.status = OutputStatus::kEqual;
  if (a->has_token_ids && b->has_token_ids) {
    const size_t n = std::min(a->token_ids.size(), b->token_ids.size());
    size_t i = 0;
    while (i < n && a->token_ids[i] == b->token_ids[i]) ++i;
    const bool aborted = a->finish_reason == "abort" || b->finish_reason == "abort";
    if (i == n && a->token_ids.size() != b->token_ids.size() && aborted) {
      // Cut short at another point (another schedule, or a client leaving at another time):
      // nothing to compare beyond the shorter output, which agrees.
      p.status = OutputStatus::kNotCompared;
      p.note = "aborted at another point; the tokens agree up to " + std::to_string(i);
      return;
    }
    if (i < n || a->token_ids.size() != b->token_ids.size()) {
      p.status = OutputStatus::kDifferent;
      p.first_difference = int(i);
      p.note = "tokens differ from position " + std::to_string(i);
    }
  } else if (a->text != b->text) {  // a client-side record has text only
    p.status = OutputStatus::kDifferent;
    p.note = "texts differ";
  }
  if (p.status == OutputStatus::kEqual && a->finish_reason != b->finish_reason) {
    p.status = OutputStatus::kDifferent;
    p.note = "finish reasons differ";
  }
}

void count(OutputComparison& c, OutputStatus s) {
  switch (s) {
    case OutputStatus::kEqual: c.equal++; break;
    case OutputStatus::kDifferent: c.different++; break;
    case OutputStatus::kNotCompared: c.not_compared++; break;
    case OutputStatus::kOnlyA: c.only_a++; break;
    case OutputStatus::kOnlyB: c.only_b++; break;
  }
}

}  // namespace

std::string_view status_name(OutputStatus s) {
  static constexpr std::string_view kNames[] = {"equal", "different", "not compared", "only in A",
                                                "only in B"};
  return kNames[int(s)];
}

OutputComparison compare_outputs(const RequestLog& a, const RequestLog& b) {
  OutputComparison c;
  c.available = !a.requests.empty() && !b.requests.empty();
  if (!c.available) return c;
  std::map<std::string, std::deque<const RecordedRequest*>> in_b;
  for (const RecordedRequest& r : b.requests) in_b[request_key(r)].push_back(&r);
  auto add = [&](OutputPair p) {
    count(c, p.status);
    c.pairs.push_back(std::move(p));
  };
  for (const RecordedRequest& ra : a.requests) {
    auto& queue = in_b[request_key(ra)];
    const RecordedRequest* rb = queue.empty() ? nullptr : queue.front();
    if (rb) queue.pop_front();
    const auto outs_a = a.outputs_of(ra.id);
    const auto outs_b = rb ? b.outputs_of(rb->id) : std::vector<const RecordedOutput*>{};
    for (int i = 0; i < ra.n(); ++i) {
      OutputPair p;
      p.a_id = ra.id;
      p.index = i;
      auto find = [i](const std::vector<const RecordedOutput*>& v) -> const RecordedOutput* {
        for (const RecordedOutput* o : v)
          if (o->index == i) return o;
        return nullptr;
      };
      if (!rb) {
        p.status = OutputStatus::kOnlyA;
        p.note = "no such request in B";
        if (const RecordedOutput* o = find(outs_a)) p.a_finish = o->finish_reason, p.a_text = o->text;
        add(std::move(p));
        continue;
      }
      p.b_id = rb->id;
      compare_pair(find(outs_a), find(outs_b), ra.greedy() || ra.seed() == rb->seed(), p);
      add(std::move(p));
    }
  }
  for (auto& [key, rest] : in_b)
    for (const RecordedRequest* rb : rest)
      for (int i = 0; i < rb->n(); ++i) {
        OutputPair p;
        p.status = OutputStatus::kOnlyB;
        p.b_id = rb->id;
        p.index = i;
        p.note = "no such request in A";
        add(std::move(p));
      }
  return c;
}

nlohmann::json to_json(const OutputComparison& c, size_t max_rows) {
  nlohmann::json j = {{"available", c.available}, {"equal", c.equal},
                      {"different", c.different}, {"not_compared", c.not_compared},
                      {"only_a", c.only_a},       {"only_b", c.only_b}};
  nlohmann::json rows = nlohmann::json::array();
  for (const OutputPair& p : c.pairs) {
    if (p.status == OutputStatus::kEqual || rows.size() >= max_rows) continue;
    rows.push_back({{"status", status_name(p.status)}, {"a_request_id", p.a_id},
                    {"b_request_id", p.b_id}, {"index", p.index}, {"note", p.note},
                    {"first_difference", p.first_difference}, {"a_tokens", p.a_tokens},
                    {"b_tokens", p.b_tokens}, {"a_finish", p.a_finish}, {"b_finish", p.b_finish}});
  }
  j["not_equal"] = std::move(rows);
  return j;
}

}  // namespace nanovllm::trace
