// An independent checker of Chrome trace event files (written from the Trace Event Format's
// rules, not from the writer): every event has ph/ts/pid/tid/name; timestamps never go back on a
// track (thread slices and instants: pid+tid; counters: pid+name; async spans: pid+cat+id);
// complete events have dur >= 0 and lie inside their parent when nested; async begin/end pairs
// nest properly and all are closed.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

namespace nanovllm::trace_test {

inline std::vector<std::string> validate_trace_events(const nlohmann::json& events) {
  using nlohmann::json;
  std::vector<std::string> errors;
  auto err = [&](size_t i, const std::string& what) {
    if (errors.size() < 20) errors.push_back("event " + std::to_string(i) + ": " + what);
  };
  if (!events.is_array()) return {"top level is not an array"};
  std::map<std::string, double> last_ts;                 // track -> last timestamp
  std::map<std::string, std::vector<std::string>> open;  // async track -> names (stack)
  std::map<std::string, std::vector<std::pair<double, double>>> x_stack;  // thread -> [begin, end)
  constexpr double kEps = 0.002;  // 3-decimal rounding of ts and dur
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!e.is_object()) {
      err(i, "not an object");
      continue;
    }
    bool ok = true;
    for (const char* k : {"ph", "ts", "pid", "tid", "name"})
      if (!e.contains(k)) {
        err(i, std::string("missing ") + k);
        ok = false;
      }
    if (!ok) continue;
    if (!e["ph"].is_string() || e["ph"].get<std::string>().size() != 1) {
      err(i, "bad ph");
      continue;
    }
    if (!e["ts"].is_number() || e["ts"].get<double>() < 0) {
      err(i, "bad ts");
      continue;
    }
    if (!e["name"].is_string()) {
      err(i, "name is not a string");
      continue;
    }
    const char ph = e["ph"].get<std::string>()[0];
    const double ts = e["ts"].get<double>();
    const std::string pid = e["pid"].dump(), thread = pid + "/" + e["tid"].dump();
    std::string track;
    switch (ph) {
      case 'M':
        continue;  // metadata: no timeline position
      case 'X':
      case 'i':
      case 'B':
      case 'E':
        track = "thread " + thread;
        break;
      case 'C':
        track = "counter " + pid + "/" + e["name"].get<std::string>();
        if (!e.contains("args") || !e["args"].is_object() || e["args"].empty())
          err(i, "counter without args");
        else
          for (auto& [k, v] : e["args"].items())
            if (!v.is_number()) err(i, "counter value " + k + " not a number");
        break;
      case 'b':
      case 'e':
      case 'n':
        if (!e.contains("id") || !e.contains("cat")) {
          err(i, "async event without id/cat");
          continue;
        }
        track = "async " + pid + "/" + e["cat"].dump() + "/" + e["id"].dump();
        break;
      default:
        err(i, std::string("unexpected ph ") + ph);
        continue;
    }
    auto it = last_ts.find(track);
    if (it != last_ts.end() && ts < it->second) err(i, "timestamp goes back on " + track);
    last_ts[track] = ts;
    if (ph == 'X') {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) {
        err(i, "bad dur");
        continue;
      }
      const double end = ts + e["dur"].get<double>();
      auto& st = x_stack[thread];
      while (!st.empty()) {
        const auto [b, en] = st.back();
        if (ts >= b - kEps && end <= en + kEps) break;  // nested in it
        if (ts >= en - kEps) {
          st.pop_back();
          continue;
        }  // after it
        err(i, "complete event overlaps its enclosing one without nesting");
        break;
      }
      st.emplace_back(ts, end);
    } else if (ph == 'b') {
      open[track].push_back(e["name"].get<std::string>());
    } else if (ph == 'e') {
      auto& st = open[track];
      if (st.empty())
        err(i, "async end without begin on " + track);
      else if (st.back() != e["name"].get<std::string>())
        err(i, "async end '" + e["name"].get<std::string>() + "' does not match open '" +
                   st.back() + "'");
      else
        st.pop_back();
    }
  }
  for (auto& [track, st] : open)
    if (!st.empty())
      errors.push_back(track + ": " + std::to_string(st.size()) + " async span(s) never ended");
  return errors;
}

}  // namespace nanovllm::trace_test
