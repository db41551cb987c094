#include "trace/request_log.h"

#include <algorithm>

#include "trace/trace_data.h"
#include "util/check.h"

namespace nanovllm::trace {

namespace {

using nlohmann::json;

std::vector<int> token_ids(const json& a, const char* key, const std::string& what) {
  auto it = a.find(key);
  NV_CHECK(it != a.end() && it->is_array(), what, " has no '", key, "' list");
  std::vector<int> ids;
  ids.reserve(it->size());
  for (const json& t : *it) {
    NV_CHECK(t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() <= INT32_MAX, what,
             ": '", key, "' holds ", t.dump(), ", not a token id");
    ids.push_back(t.get<int>());
  }
  return ids;
}

uint64_t request_id(const json& a, const std::string& what) {
  auto it = a.find("request_id");
  NV_CHECK(it != a.end() && it->is_number_unsigned(), what, " has no request_id");
  return it->get<uint64_t>();
}

RecordedRequest read_record(const json& ev, size_t ordinal) {
  const std::string what = "request record #" + std::to_string(ordinal);
  const json& a = ev.value("args", json::object());
  const int format = a.value("format", 0);
  NV_CHECK(format >= 1 && format <= kRequestRecordFormat, what, " has format ", format,
           "; this nanovllm reads request records of format 1..", kRequestRecordFormat,
           " (a trace from another version: replay it with the nanovllm that wrote it)");
  RecordedRequest r;
  r.id = request_id(a, what);
  r.ts = ev.value("ts", 0.0);
  r.step = a.value("step", int64_t(0));
  r.route = a.value("route", "");
  r.body = a.value("body", "");
  r.prompt_token_ids = token_ids(a, "prompt_token_ids", what);
  auto p = a.find("params");
  NV_CHECK(p != a.end() && p->is_object(), what, " has no 'params' object");
  r.params = *p;
  r.seed_given = a.value("seed_given", false);
  NV_CHECK(r.route.empty() || r.route.front() == '/', what, ": route '", r.route,
           "' is not a path");
  return r;
}

RecordedOutput read_output(const json& ev, size_t ordinal) {
  const std::string what = "request output #" + std::to_string(ordinal);
  const json& a = ev.value("args", json::object());
  RecordedOutput o;
  o.request_id = request_id(a, what);
  o.index = a.value("index", 0);
  o.ts = ev.value("ts", 0.0);
  o.step = a.value("step", int64_t(0));
  o.finish_reason = a.value("finish_reason", "");
  o.has_token_ids = a.contains("token_ids");
  if (o.has_token_ids) o.token_ids = token_ids(a, "token_ids", what);
  o.text = a.value("text", "");
  o.error = a.value("error", "");
  return o;
}

}  // namespace

bool RecordedRequest::greedy() const {
  auto t = params.find("temperature");
  return t != params.end() && t->is_number() && t->get<double>() == 0;
}

uint64_t RecordedRequest::seed() const {
  auto s = params.find("seed");
  return s != params.end() && s->is_number_unsigned() ? s->get<uint64_t>() : 0;
}

int RecordedRequest::n() const { return params.value("n", 1); }

std::vector<const RecordedOutput*> RequestLog::outputs_of(uint64_t id) const {
  std::vector<const RecordedOutput*> out;
  auto it = std::lower_bound(outputs.begin(), outputs.end(), id,
                             [](const RecordedOutput& o, uint64_t x) { return o.request_id < x; });
  for (; it != outputs.end() && it->request_id == id; ++it) out.push_back(&*it);
  return out;
}

RequestLog request_log_from_events(const json& events, bool truncated) {
  RequestLog log;
  log.truncated = truncated;
  for (const json& ev : events) {
    if (!ev.is_object()) continue;
    const std::string ph = ev.value("ph", ""), name = ev.value("name", "");
    if (ph == "X" && ev.value("cat", "") == "step") log.steps++;
    if (ph == "i" && name == "engine_config" && ev.contains("args")) log.config = ev["args"];
    if (ph == "i" && ev.value("cat", "") == "marker")  // (events are written in time order)
      log.markers.push_back({name, ev.value("ts", 0.0), log.steps});
    if (ph != "i" || ev.value("cat", "") != "replay") continue;
    if (name == "request_record") log.requests.push_back(read_record(ev, log.requests.size()));
    if (name == "request_output") log.outputs.push_back(read_output(ev, log.outputs.size()));
  }
  std::stable_sort(log.requests.begin(), log.requests.end(),
                   [](const auto& a, const auto& b) { return a.id < b.id; });
  std::stable_sort(log.outputs.begin(), log.outputs.end(), [](const auto& a, const auto& b) {
    return a.request_id != b.request_id ? a.request_id < b.request_id : a.index < b.index;
  });
  for (size_t i = 1; i < log.requests.size(); ++i)
    NV_CHECK(log.requests[i].id != log.requests[i - 1].id, "request ", log.requests[i].id,
             " is recorded twice (two runs in one file?)");
  return log;
}

RequestLog load_request_log(const std::string& path, bool need_records) {
  const std::string text = read_trace_file(path);
  try {
    bool truncated = false;
    const nlohmann::json events = parse_trace_events(text, truncated);
    RequestLog log = request_log_from_events(events, truncated);
    NV_CHECK(!need_records || !log.requests.empty(),
             "no request records (request_record events): record the run with --trace FILE "
             "--trace-requests (serve, generate, bench); traces from before nanovllm replay have none");
    return log;
  } catch (const Error& e) {
    NV_THROW("trace file '", path, "': ", e.what());
  }
}

}  // namespace nanovllm::trace
