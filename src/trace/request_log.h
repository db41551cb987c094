// RequestLog: the requests a trace recorded with --trace-requests (`request_record` and
// `request_output` events, src/trace/README.md), read back for `nanovllm replay` and
// `trace-view --compare`. Sampling parameters stay JSON here (the engine's params_json.h reads
// them): this folder does not depend on the engine.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nanovllm::trace {

inline constexpr int kRequestRecordFormat = 1;  // the newest `format` this build reads

struct RecordedRequest {
  uint64_t id = 0;          // the engine's request id in the recorded run
  double ts = 0;            // arrival, microseconds (the trace's clock)
  int64_t step = 0;         // engine steps completed before it arrived
  std::string route;        // "" = the in-process API
  std::string body;         // HTTP body as received ("" for the in-process API)
  std::vector<int> prompt_token_ids;
  nlohmann::json params;    // SamplingParams as JSON, the seed the engine drew included
  bool seed_given = false;  // the client gave the seed (else the engine drew it)
  // The outputs can be compared with another run of the same request: greedy, or the same seed.
  bool greedy() const;
  uint64_t seed() const;
  int n() const;
};

struct RecordedOutput {
  uint64_t request_id = 0;
  int index = 0;         // completion index (n > 1)
  double ts = 0;
  int64_t step = 0;      // engine steps completed when it finished (aborts: before that step)
  std::string finish_reason;
  std::vector<int> token_ids;
  bool has_token_ids = true;  // false: a client-side record (replay --url) that got text only
  std::string text;           // "" without a tokenizer
  std::string error;
};

// A named instant (cat "marker", e.g. bench's "warmup_end"), which a replay writes again at the
// same point so that trace-view leaves the same warm-up out of both runs.
struct RecordedMarker {
  std::string name;
  double ts = 0;
  int64_t step = 0;  // step events before it in the file (it was written between steps)
};

struct RequestLog {
  std::vector<RecordedRequest> requests;  // by arrival (request id order)
  std::vector<RecordedOutput> outputs;    // by request id, then index
  int64_t steps = 0;                      // step events in the trace
  nlohmann::json config;                  // the engine_config event's args (null if absent)
  std::vector<RecordedMarker> markers;    // in file order
  bool truncated = false;                 // the file was cut short (a killed process)
  // Outputs of request `id` (empty when it never finished in the recorded run).
  std::vector<const RecordedOutput*> outputs_of(uint64_t id) const;
};

// Reads the records of parsed trace events (trace_data.h: parse_trace_events). A trace without
// any yields an empty log; a record of a newer format, or one missing what replay needs, throws
// nanovllm::Error saying which record and what.
RequestLog request_log_from_events(const nlohmann::json& events, bool truncated);
// load + parse + read; `need_records`: no request_record at all is an error that says how to
// record them.
RequestLog load_request_log(const std::string& path, bool need_records);

}  // namespace nanovllm::trace
