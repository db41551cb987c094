// TraceData: a nanovllm trace file read back (the events EngineTracer writes; schema in
// README.md), as the series `trace-view` draws and summarizes. Times are microseconds since the
// engine started tracing.
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm::trace {

struct StepRecord {
  double ts = 0, dur = 0;
  std::string phase;  // prefill | decode | mixed
  int num_seqs = 0, prefill_tokens = 0, decode_tokens = 0, num_preempted = 0;
  std::array<double, 5> split_us{};  // schedule, prepare, forward, sample, postprocess
  double end() const { return ts + dur; }
};

struct KvSample {
  double ts = 0;
  int used = 0, free = 0, cached = 0;
};

struct QueueSample {
  double ts = 0;
  int waiting = 0, running = 0;
};

struct PhaseSpan {
  std::string name;  // queued | prefill | decode | preempted
  double begin = 0, end = 0;
};

struct RequestRecord {
  uint64_t id = 0;
  double arrival = -1, end = -1;  // -1: not in the trace
  int prompt_tokens = 0;
  std::string finish_reason;  // "" while open; "unfinished" when the engine closed first
  std::vector<PhaseSpan> spans;
  std::vector<double> token_times;  // end of every step that sampled a token for it
  nlohmann::json end_args;          // the tracer's own per-request figures (ttft_ms, ...)
};

struct TraceData {
  nlohmann::json config;       // engine_config args (null if absent)
  nlohmann::json final_stats;  // engine_stats args (null when the file was cut short)
  std::vector<StepRecord> steps;
  std::vector<KvSample> kv;
  std::vector<QueueSample> queues;
  std::vector<double> preemption_times;  // one entry per preemption (step start)
  int64_t prefix_hit_tokens = 0, prefix_query_tokens = 0;
  std::vector<RequestRecord> requests;  // ordered by id
  bool truncated = false;               // the array was not terminated (process killed)
  double t_begin = 0, t_end = 0;        // first arrival or step start .. last event
  // Left out: what came before a "warmup_end" marker (bench's warm-up request), unless
  // parse_trace was asked to keep it. -1: no marker in the file.
  double warmup_end = -1;
  int64_t warmup_steps = 0, warmup_requests = 0;
};

// Parses a trace; throws nanovllm::Error with a clear message for files that are not JSON
// trace event arrays or hold no nanovllm events. An unterminated array is repaired.
// include_warmup: keep the steps and requests before a "warmup_end" marker.
TraceData parse_trace(std::string_view text, bool include_warmup = false);
TraceData load_trace(const std::string& path, bool include_warmup = false);

// The pieces of parse_trace, for readers that take more from the same events (request_log.h):
// the events as a JSON array (`truncated`: the array was unterminated and its incomplete last
// line dropped), and the series read from them.
nlohmann::json parse_trace_events(std::string_view text, bool& truncated);
TraceData trace_from_events(const nlohmann::json& events, bool truncated,
                            bool include_warmup = false);
std::string read_trace_file(const std::string& path);  // clear error when it cannot be opened

}  // namespace nanovllm::trace
