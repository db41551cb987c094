#include "engine/engine_tracer.h"

#include <algorithm>

#include "engine/stats_json.h"

namespace nanovllm {

namespace {

constexpr int kStepTid = 1;     // steps, their phases and the counters
constexpr int kRequestTid = 2;  // async request spans (tracks are keyed by id, not tid)
constexpr const char* kSplitNames[] = {"schedule", "prepare", "forward", "sample", "postprocess"};

const char* phase_name(bool prefill, bool decode) {
  return prefill && decode ? "mixed" : prefill ? "prefill" : "decode";
}

}  // namespace

// Adds the time spent in a hook to the tracer's own cost.
struct OverheadScope {
  double& total;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~OverheadScope() {
    total +=
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
};

EngineTracer::EngineTracer(const std::string& path, const Config& config)
    : writer_(path), origin_(std::chrono::steady_clock::now()), record_requests_(config.trace_requests) {
  auto& m = writer_.begin_event('M', "process_name", "__metadata", kStepTid, 0);
  m.key("args").begin_object().field("name", "nanovllm engine").end_object();
  writer_.end_event();
  writer_.begin_event('M', "thread_name", "__metadata", kStepTid, 0)
      .key("args")
      .begin_object()
      .field("name", "steps")
      .end_object();
  writer_.end_event();
  auto& e = writer_.begin_event('i', "engine_config", "engine", kStepTid, 0);
  e.field("s", "g")
      .key("args")
      .begin_object()
      .field("model", config.model)
      .field("device", config.device)
      .field("policy", config.policy)
      .field("num_kvcache_blocks", config.num_kvcache_blocks)
      .field("block_size", config.kvcache_block_size)
      .field("max_num_seqs", config.max_num_seqs)
      .field("max_num_batched_tokens", config.max_num_batched_tokens)
      .field("max_model_len", config.max_model_len)
      .field("enable_prefix_caching", config.enable_prefix_caching)
      .field("trace_requests", config.trace_requests)
      .end_object();
  writer_.end_event();
  if (record_requests_) {
    writer_.begin_event('M', "thread_name", "__metadata", kRecordTid, 0)
        .key("args")
        .begin_object()
        .field("name", "request records")
        .end_object();
    writer_.end_event();
  }
}

// Without close() the writer still terminates the array (spans may then stay open).
EngineTracer::~EngineTracer() = default;

void EngineTracer::begin_phase(uint64_t id, Request& r, Phase p, double ts) {
  static constexpr const char* kNames[] = {"queued", "prefill", "decode", "preempted"};
  r.phase = p;
  r.phase_begin = ts;
  auto& js = writer_.begin_event('b', kNames[int(p)], "request", kRequestTid, ts);
  js.field("id", id);
  if (p == Phase::kPrefill) {
    js.key("args").begin_object().field("recompute", r.preemptions > 0);
    js.field("cached_tokens", r.cached_tokens).end_object();
  }
  writer_.end_event();
}

void EngineTracer::end_phase(uint64_t id, Request& r, double ts) {
  static constexpr const char* kNames[] = {"queued", "prefill", "decode", "preempted"};
  if (r.phase == Phase::kQueued || r.phase == Phase::kPreempted) r.queue_us += ts - r.phase_begin;
  writer_.begin_event('e', kNames[int(r.phase)], "request", kRequestTid, ts).field("id", id);
  writer_.end_event();
}

void EngineTracer::end_request(uint64_t id, Request& r, double ts, bool unfinished) {
  end_phase(id, r, ts);
  auto& js = writer_.begin_event('e', "request " + std::to_string(id), "request", kRequestTid, ts);
  js.field("id", id).key("args").begin_object();
  js.field("finish_reason",
           unfinished ? std::string_view("unfinished") : std::string_view(r.finish_reason));
  js.field("prompt_tokens", r.prompt_tokens).field("output_tokens", r.output_tokens);
  js.field("cached_tokens", r.cached_tokens).field("preemptions", r.preemptions);
  js.field("queue_ms", r.queue_us / 1e3, 3).field("e2e_ms", (ts - r.arrival) / 1e3, 3);
  if (r.first_token >= 0) js.field("ttft_ms", (r.first_token - r.arrival) / 1e3, 3);
  if (r.output_tokens > 1) {
    js.field("itl_mean_ms", r.itl_sum / (r.output_tokens - 1) / 1e3, 3);
    js.field("itl_max_ms", r.itl_max / 1e3, 3);
  }
  if (unfinished) js.field("unfinished", true);
  js.end_object();
  writer_.end_event();
}

void EngineTracer::arrived(uint64_t id, int prompt_tokens) {
  OverheadScope o{overhead_us_};
  const double ts = now_us();
  Request& r = requests_[id];
  r.arrival = ts;
  r.prompt_tokens = prompt_tokens;
  auto& js = writer_.begin_event('b', "request " + std::to_string(id), "request", kRequestTid, ts);
  js.field("id", id).key("args").begin_object().field("request_id", id);
  js.field("prompt_tokens", prompt_tokens).end_object();
  writer_.end_event();
  begin_phase(id, r, Phase::kQueued, ts);
}

void EngineTracer::finished(uint64_t id, std::string_view reason) {
  OverheadScope o{overhead_us_};
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  it->second.finish_reason = reason;
  if (in_step_) {  // ended in step_end(), after its last token
    it->second.finishing = true;
    step_finished_.push_back(id);
    return;
  }
  end_request(id, it->second, now_us(), false);
  requests_.erase(it);
}

void EngineTracer::scheduled(const SchedulerOutput& so, const Scheduler& sched) {
  mark(StepMark::kScheduled);
  OverheadScope o{overhead_us_};
  const double ts = times_[int(StepMark::kScheduled)];
  in_step_ = true;
  step_admitted_.clear();
  step_preempted_.clear();
  step_finished_.clear();
  // Preempted in this schedule(): running before, waiting now (they never run in the same step).
  if (so.num_preempted > 0) {
    for (const Sequence* s : sched.waiting()) {
      auto it = requests_.find(s->seq_id);
      if (it == requests_.end()) continue;
      Request& r = it->second;
      if (r.phase != Phase::kPrefill && r.phase != Phase::kDecode) continue;
      end_phase(s->seq_id, r, ts);
      r.preemptions++;
      preemptions_++;
      begin_phase(s->seq_id, r, Phase::kPreempted, ts);
      step_preempted_.push_back(s->seq_id);
    }
  }
  // Admitted: waiting before, scheduled (and running) now. Prefix-cache hits are counted here,
  // as the engine's statistics count them (every admission, re-admissions included).
  for (const ScheduledSeq& ss : so.seqs) {
    auto it = requests_.find(ss.seq->seq_id);
    if (it == requests_.end()) continue;
    Request& r = it->second;
    if (r.phase != Phase::kQueued && r.phase != Phase::kPreempted) continue;
    if (ss.seq->status != SequenceStatus::RUNNING) continue;
    prefix_hit_tokens_ += ss.seq->num_prefix_hit_tokens;
    prefix_query_tokens_ += ss.seq->size();
    if (!r.admitted_once) r.cached_tokens = ss.seq->num_prefix_hit_tokens;
    r.admitted_once = true;
    end_phase(ss.seq->seq_id, r, ts);
    begin_phase(ss.seq->seq_id, r, Phase::kPrefill, ts);
    step_admitted_.push_back(ss.seq->seq_id);
  }
}

void EngineTracer::step_end(const SchedulerOutput& so, const Scheduler& sched) {
  mark(StepMark::kEnd);
  OverheadScope o{overhead_us_};
  const double t0 = times_[int(StepMark::kBegin)], ts = times_[int(StepMark::kEnd)];
  steps_++;
  step_time_us_ += ts - t0;
  // Tokens: every sampling sequence produced one at the step's end.
  for (const ScheduledSeq& ss : so.seqs) {
    if (!ss.sample) continue;
    auto it = requests_.find(ss.seq->seq_id);
    if (it == requests_.end()) continue;
    Request& r = it->second;
    if (r.first_token < 0) {
      r.first_token = ts;
    } else {
      const double gap = ts - r.last_token;
      r.itl_sum += gap;
      r.itl_max = std::max(r.itl_max, gap);
    }
    r.last_token = ts;
    r.output_tokens += ss.num_spec_tokens > 0 ? ss.seq->num_step_tokens : 1;
    if (r.phase == Phase::kPrefill && !r.finishing) {
      end_phase(ss.seq->seq_id, r, ts);
      begin_phase(ss.seq->seq_id, r, Phase::kDecode, ts);
    }
  }
  write_step(so, t0, ts - t0);
  for (uint64_t id : step_finished_) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    end_request(id, it->second, ts, false);
    requests_.erase(it);
  }
  write_counters(sched, ts);
  in_step_ = false;
  if (sched.is_finished()) writer_.flush();  // idle: the file on disk is complete so far
}

void EngineTracer::write_step(const SchedulerOutput& so, double t0, double dur) {
  const int tokens = so.num_prefill_tokens + so.num_decode_tokens;
  auto& b = writer_.begin_event('C', "batch", "engine", kStepTid, t0);
  b.key("args").begin_object().field("seqs", int(so.seqs.size()));
  b.field("prefill_tokens", so.num_prefill_tokens).field("decode_tokens", so.num_decode_tokens);
  b.end_object();
  writer_.end_event();

  auto& js = writer_.begin_event(
      'X', phase_name(so.num_prefill_tokens > 0, so.num_decode_tokens > 0), "step", kStepTid, t0);
  js.field("dur", dur, 3).key("args").begin_object();
  js.field("step", steps_ - 1).field("num_seqs", int(so.seqs.size()));
  js.field("prefill_tokens", so.num_prefill_tokens).field("decode_tokens", so.num_decode_tokens);
  if (so.num_spec_tokens > 0) {  // speculative decoding: drafts verified, and accepted
    int accepted = 0;
    for (const ScheduledSeq& ss : so.seqs) accepted += ss.num_spec_tokens > 0 ? ss.seq->num_spec_accepted : 0;
    js.field("spec_tokens", so.num_spec_tokens).field("spec_accepted", accepted);
  }
  js.field("tokens_per_s", dur > 0 ? tokens / (dur * 1e-6) : 0.0, 1);
  js.key("split_us").begin_object();
  for (int i = 0; i < 5; ++i) js.field(kSplitNames[i], times_[i + 1] - times_[i], 3);
  js.end_object();
  js.key("seqs").begin_array();
  for (const ScheduledSeq& ss : so.seqs) {
    js.begin_object().field("seq", ss.seq->seq_id).field("tokens", ss.num_new_tokens);
    if (!ss.sample) js.field("sample", false);
    if (ss.num_spec_tokens > 0)
      js.field("drafts", ss.num_spec_tokens).field("accepted", ss.seq->num_spec_accepted);
    js.end_object();
  }
  js.end_array();
  js.field("num_preempted", so.num_preempted);
  if (!step_admitted_.empty()) {
    js.key("admitted").begin_array();
    for (uint64_t id : step_admitted_) js.value(id);
    js.end_array();
  }
  if (!step_preempted_.empty()) {
    js.key("preempted").begin_array();
    for (uint64_t id : step_preempted_) js.value(id);
    js.end_array();
  }
  if (!step_finished_.empty()) {
    js.key("finished").begin_array();
    for (uint64_t id : step_finished_) js.value(id);
    js.end_array();
  }
  js.end_object();
  writer_.end_event();
  for (int i = 0; i < 5; ++i) {  // nested slices on the same track
    writer_.begin_event('X', kSplitNames[i], "step_phase", kStepTid, times_[i])
        .field("dur", times_[i + 1] - times_[i], 3);
    writer_.end_event();
  }
}

void EngineTracer::write_counters(const Scheduler& sched, double ts) {
  const BlockManager& bm = sched.block_manager();
  writer_.begin_event('C', "kv_blocks", "engine", kStepTid, ts)
      .key("args")
      .begin_object()
      .field("used", bm.num_used_blocks())
      .field("free", bm.num_free_blocks())
      .field("cached", int64_t(bm.hash_to_block_id().size()))
      .end_object();
  writer_.end_event();
  writer_.begin_event('C', "queues", "engine", kStepTid, ts)
      .key("args")
      .begin_object()
      .field("waiting", int64_t(sched.num_waiting()))
      .field("running", int64_t(sched.num_running()))
      .end_object();
  writer_.end_event();
  writer_.begin_event('C', "preemptions", "engine", kStepTid, ts)
      .key("args")
      .begin_object()
      .field("total", preemptions_)
      .end_object();
  writer_.end_event();
  writer_.begin_event('C', "prefix_cache_tokens", "engine", kStepTid, ts)
      .key("args")
      .begin_object()
      .field("hit", prefix_hit_tokens_)
      .field("query", prefix_query_tokens_)
      .end_object();
  writer_.end_event();
}

void EngineTracer::marker(std::string_view name) {
  if (closed_) return;
  auto& js = writer_.begin_event('i', name, "marker", kStepTid, now_us());
  js.field("s", "g");
  writer_.end_event();
}

void EngineTracer::close(const EngineStats& stats) {
  if (closed_) return;
  closed_ = true;
  const double ts = now_us();
  std::vector<uint64_t> live;
  for (const auto& [id, r] : requests_) live.push_back(id);
  std::sort(live.begin(), live.end());
  for (uint64_t id : live) end_request(id, requests_.at(id), ts, true);
  requests_.clear();
  auto& js = writer_.begin_event('i', "engine_stats", "engine", kStepTid, ts);
  js.field("s", "g").key("args").begin_object();
  js.key("stats").raw(to_json(stats).dump());
  js.field("traced_steps", steps_);
  js.field("step_time_us", step_time_us_, 3);
  js.field("tracer_overhead_us", overhead_us_, 3);
  js.end_object();
  writer_.end_event();
  writer_.close();
}

}  // namespace nanovllm
