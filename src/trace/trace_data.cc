#include "trace/trace_data.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "util/check.h"

namespace nanovllm::trace {

namespace {

using nlohmann::json;

// A file whose writer was killed ends without "]", possibly in the middle of an event line.
// Drops the incomplete tail (each event is one line) and closes the array.
json parse_repairing(std::string_view text, bool& truncated) {
  truncated = false;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  std::string s(text);
  while (!s.empty()) {
    size_t end = s.find_last_not_of(" \t\r\n,");
    if (end == std::string::npos) break;
    if (s[end] == '}') {  // a complete event line ends here (or a '}' inside a cut line)
      std::string candidate = s.substr(0, end + 1) + "\n]";
      j = json::parse(candidate, nullptr, false);
      if (!j.is_discarded()) {
        truncated = true;
        return j;
      }
    }
    const size_t nl = s.rfind('\n', end);  // drop the last line and retry
    if (nl == std::string::npos) break;
    s.resize(nl);
  }
  NV_THROW("not a JSON trace event array (it does not parse, even with its last line dropped)");
}

double num(const json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

int inum(const json& j, const char* key) { return int(num(j, key)); }

void read_step(const json& ev, double ts, TraceData& d, std::map<uint64_t, RequestRecord>& reqs) {
  const json& a = ev.value("args", json::object());
  StepRecord s;
  s.ts = ts;
  s.dur = num(ev, "dur");
  s.phase = ev.value("name", "");
  s.num_seqs = inum(a, "num_seqs");
  s.prefill_tokens = inum(a, "prefill_tokens");
  s.decode_tokens = inum(a, "decode_tokens");
  s.num_preempted = inum(a, "num_preempted");
  static constexpr const char* kSplit[] = {"schedule", "prepare", "forward", "sample",
                                           "postprocess"};
  if (a.contains("split_us"))
    for (int i = 0; i < 5; ++i) s.split_us[size_t(i)] = num(a["split_us"], kSplit[i]);
  if (a.contains("seqs") && a["seqs"].is_array())
    for (const json& q : a["seqs"]) {
      if (!q.is_object() || !q.contains("seq")) continue;
      if (q.value("sample", true)) reqs[q["seq"].get<uint64_t>()].token_times.push_back(s.end());
    }
  for (int i = 0; i < s.num_preempted; ++i) d.preemption_times.push_back(ts);
  d.steps.push_back(std::move(s));
}

void read_request_event(const json& ev, char ph, double ts,
                        std::map<uint64_t, RequestRecord>& reqs) {
  if (!ev.contains("id") || !ev["id"].is_number_unsigned()) return;
  RequestRecord& r = reqs[ev["id"].get<uint64_t>()];
  r.id = ev["id"].get<uint64_t>();
  const std::string name = ev.value("name", "");
  const json& a = ev.value("args", json::object());
  if (name.rfind("request ", 0) == 0) {
    if (ph == 'b') {
      r.arrival = ts;
      r.prompt_tokens = inum(a, "prompt_tokens");
    } else {
      r.end = ts;
      r.finish_reason = a.value("finish_reason", "");
      r.end_args = a;
    }
    return;
  }
  if (ph == 'b') {
    r.spans.push_back({name, ts, -1});
    return;
  }
  for (auto it = r.spans.rbegin(); it != r.spans.rend(); ++it)
    if (it->name == name && it->end < 0) {
      it->end = ts;
      break;
    }
}

}  // namespace

json parse_trace_events(std::string_view text, bool& truncated) {
  json events = parse_repairing(text, truncated);
  if (events.is_object() && events.contains("traceEvents")) events = std::move(events["traceEvents"]);
  NV_CHECK(events.is_array(), "not a trace event array (the top level is ", events.type_name(),
           ")");
  return events;
}

TraceData parse_trace(std::string_view text, bool include_warmup) {
  bool truncated = false;
  const json events = parse_trace_events(text, truncated);
  return trace_from_events(events, truncated, include_warmup);
}

TraceData trace_from_events(const json& events, bool truncated, bool include_warmup) {
  TraceData d;
  d.truncated = truncated;
  std::map<uint64_t, RequestRecord> reqs;
  bool nanovllm_events = false;
  struct PrefixSample {
    double ts;
    int64_t hit, query;  // cumulative counters
  };
  std::vector<PrefixSample> prefix;
  for (const json& ev : events) {
    if (!ev.is_object()) continue;
    const std::string ph = ev.value("ph", "");
    if (ph.size() != 1) continue;
    const double ts = num(ev, "ts");
    const std::string name = ev.value("name", ""), cat = ev.value("cat", "");
    const json& args = ev.value("args", json::object());
    switch (ph[0]) {
      case 'i':
        if (name == "engine_config") d.config = args, nanovllm_events = true;
        if (name == "engine_stats") d.final_stats = args;
        if (name == "warmup_end" && cat == "marker") d.warmup_end = std::max(d.warmup_end, ts);
        break;
      case 'X':
        if (cat == "step") read_step(ev, ts, d, reqs), nanovllm_events = true;
        break;
      case 'C':
        if (name == "kv_blocks")
          d.kv.push_back({ts, inum(args, "used"), inum(args, "free"), inum(args, "cached")});
        if (name == "queues")
          d.queues.push_back({ts, inum(args, "waiting"), inum(args, "running")});
        if (name == "prefix_cache_tokens")
          prefix.push_back({ts, int64_t(num(args, "hit")), int64_t(num(args, "query"))});
        break;
      case 'b':
      case 'e':
        if (cat == "request") read_request_event(ev, ph[0], ts, reqs);
        break;
      default:
        break;
    }
  }
  NV_CHECK(nanovllm_events,
           "no nanovllm events (engine_config or steps): not a trace written by "
           "`--trace`");
  auto by_ts = [](const auto& a, const auto& b) { return a.ts < b.ts; };
  std::stable_sort(d.steps.begin(), d.steps.end(), by_ts);
  std::stable_sort(d.kv.begin(), d.kv.end(), by_ts);
  std::stable_sort(d.queues.begin(), d.queues.end(), by_ts);
  std::sort(d.preemption_times.begin(), d.preemption_times.end());

  // The warm-up: steps, samples, preemptions and requests before the marker are left out (the
  // prefix-cache counters are cumulative: the value at the marker is subtracted).
  const double w = include_warmup ? -1 : d.warmup_end;
  int64_t hit0 = 0, query0 = 0;
  for (const PrefixSample& p : prefix) {
    if (p.ts < w) hit0 = std::max(hit0, p.hit), query0 = std::max(query0, p.query);
    d.prefix_hit_tokens = std::max(d.prefix_hit_tokens, p.hit);
    d.prefix_query_tokens = std::max(d.prefix_query_tokens, p.query);
  }
  if (w >= 0) {
    d.prefix_hit_tokens -= hit0;
    d.prefix_query_tokens -= query0;
    auto before = [w](const auto& x) { return x.ts < w; };
    const size_t n0 = d.steps.size();
    d.steps.erase(std::remove_if(d.steps.begin(), d.steps.end(), before), d.steps.end());
    d.warmup_steps = int64_t(n0 - d.steps.size());
    d.kv.erase(std::remove_if(d.kv.begin(), d.kv.end(), before), d.kv.end());
    d.queues.erase(std::remove_if(d.queues.begin(), d.queues.end(), before), d.queues.end());
    d.preemption_times.erase(std::remove_if(d.preemption_times.begin(), d.preemption_times.end(),
                                            [w](double t) { return t < w; }),
                             d.preemption_times.end());
    for (auto it = reqs.begin(); it != reqs.end();) {
      if (it->second.arrival >= 0 && it->second.arrival < w) {
        it = reqs.erase(it);
        ++d.warmup_requests;
      } else {
        ++it;
      }
    }
  }

  double lo = d.steps.empty() ? 0 : d.steps.front().ts, hi = 0;
  for (const StepRecord& s : d.steps) hi = std::max(hi, s.end());
  for (auto& [id, r] : reqs) {
    r.id = id;
    std::sort(r.token_times.begin(), r.token_times.end());
    if (r.arrival >= 0) lo = std::min(lo, r.arrival);
    hi = std::max(hi, r.end);
    d.requests.push_back(std::move(r));
  }
  d.t_begin = lo;
  d.t_end = std::max(hi, lo);
  return d;
}

std::string read_trace_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  NV_CHECK(f.good(), "cannot open trace file '", path, "'");
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

TraceData load_trace(const std::string& path, bool include_warmup) {
  const std::string text = read_trace_file(path);
  try {
    return parse_trace(text, include_warmup);
  } catch (const Error& e) {
    NV_THROW("trace file '", path, "': ", e.what());
  }
}

}  // namespace nanovllm::trace
