// EngineTracer: the engine's life as a Chrome Trace Event Format file (Perfetto,
// chrome://tracing, `nanovllm trace-view`). The engine owns one when Config::trace_path is set
// and calls it at a few points; with tracing off the engine holds a null pointer and every hook
// is skipped by one pointer check. The event schema is in src/trace/README.md.
//
// Per step: a complete event ("X") named by the step's phase (prefill | decode | mixed) with
// the scheduled sequences and their token counts, tokens/s and the time split (schedule,
// prepare, forward, sample, postprocess) as args and as nested child slices; counters ("C") for
// KV blocks, queue lengths, preemptions, prefix-cache tokens and the batch. Per request: nested
// async spans ("b"/"e", cat "request", id = request id): the whole request, and inside it
// queued / prefill / decode / preempted; TTFT and inter-token latency are in the end args.
//
// Token time = the end of the step that sampled it (after postprocess: when the caller sees it).
// Memory: the state of live requests plus the writer's bounded buffer (written incrementally).
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/scheduler.h"
#include "nanovllm/config.h"
#include "nanovllm/request_origin.h"
#include "nanovllm/request_output.h"
#include "nanovllm/sampling_params.h"
#include "nanovllm/stats.h"
#include "trace/trace_writer.h"

namespace nanovllm {

// Time points of one step, in the order they happen (indices into the step's time array).
enum class StepMark : int { kBegin = 0, kScheduled, kPrepared, kForwarded, kSampled, kEnd, kCount };

class EngineTracer {
 public:
  // Opens `path` (throws nanovllm::Error naming it when it cannot be written) and records the
  // engine configuration (after KV sizing) as the first events.
  EngineTracer(const std::string& path, const Config& config);
  ~EngineTracer();
  EngineTracer(const EngineTracer&) = delete;
  EngineTracer& operator=(const EngineTracer&) = delete;

  // --- step hooks, in this order inside LLMEngine::step() ---
  void step_begin() { mark(StepMark::kBegin); }
  // After schedule(): admissions (with their prefix-cache hits) and preemptions.
  void scheduled(const SchedulerOutput& so, const Scheduler& sched);
  void mark(StepMark m) { times_[int(m)] = now_us(); }  // kPrepared, kForwarded, kSampled
  // After postprocess and the step's finishes: token times, the step event and the counters.
  void step_end(const SchedulerOutput& so, const Scheduler& sched);

  // --- request hooks ---
  void arrived(uint64_t request_id, int prompt_tokens);
  // Inside a step the end is recorded at the step's end (with the request's last token);
  // outside (abort, rejection at add_request) at once.
  void finished(uint64_t request_id, std::string_view reason);

  // --- request records (Config::trace_requests; engine_tracer_requests.cc) ---
  bool records_requests() const { return record_requests_; }
  // After arrived(): what `nanovllm replay` needs to send the request again (prompt ids, the
  // parameters with the seed the engine drew, the HTTP route and body), and the engine step
  // it arrived before (steps completed so far).
  void record_request(uint64_t request_id, const std::vector<int>& prompt_ids,
                      const SamplingParams& resolved, bool seed_given, const RequestOrigin* origin);
  // A completion's final output (tokens, text, finish reason), for `trace-view --compare`.
  void record_output(const RequestOutput& out);

  // A named instant in the trace (cat "marker"): e.g. "warmup_end", written by `bench` after its
  // warm-up request, before which trace-view leaves steps and requests out of its summary.
  void marker(std::string_view name);

  // Ends spans still open (args.unfinished = true), writes the final engine statistics and the
  // tracer's own cost, and terminates the file. Idempotent.
  void close(const EngineStats& stats);

  const std::string& path() const { return writer_.path(); }

 private:
  static constexpr int kRecordTid = 3;  // request_record / request_output events
  enum class Phase : uint8_t { kQueued, kPrefill, kDecode, kPreempted };
  struct Request {
    double arrival = 0, phase_begin = 0, first_token = -1, last_token = -1;
    double queue_us = 0;  // time spent queued or preempted
    double itl_sum = 0, itl_max = 0;
    int prompt_tokens = 0, output_tokens = 0, preemptions = 0, cached_tokens = 0;
    Phase phase = Phase::kQueued;
    bool admitted_once = false;
    bool finishing = false;
    std::string finish_reason;
  };

  double now_us() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_)
        .count();
  }
  void begin_phase(uint64_t id, Request& r, Phase p, double ts);
  void end_phase(uint64_t id, Request& r, double ts);
  void end_request(uint64_t id, Request& r, double ts, bool unfinished);
  void write_step(const SchedulerOutput& so, double ts, double dur);
  void write_counters(const Scheduler& sched, double ts);

  trace::TraceWriter writer_;
  std::chrono::steady_clock::time_point origin_;
  double times_[int(StepMark::kCount)] = {};
  std::unordered_map<uint64_t, Request> requests_;  // live requests only
  std::vector<uint64_t> step_admitted_, step_preempted_, step_finished_;
  bool in_step_ = false;
  bool closed_ = false;
  bool record_requests_ = false;
  int64_t steps_ = 0, preemptions_ = 0, prefix_hit_tokens_ = 0, prefix_query_tokens_ = 0;
  double overhead_us_ = 0;   // time spent inside the hooks (the tracer's own cost)
  double step_time_us_ = 0;  // sum of traced step durations
};

}  // namespace nanovllm
