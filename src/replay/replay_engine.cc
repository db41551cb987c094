#include "replay/replay_engine.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "util/progress.h"

namespace nanovllm::replay {

namespace {

using Clock = std::chrono::steady_clock;

// A request's position in the release order: its step (kSteps) or wall-clock offset (kWall).
struct Due {
  const ReplayOptions& opt;
  Clock::time_point start;
  double elapsed_us() const {
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count() * opt.speed;
  }
  bool arrival(const ReplayRequest& q, int64_t steps) const {
    return opt.timing == Timing::kSteps ? q.step <= steps : q.offset_us <= elapsed_us();
  }
  bool abort(const ReplayRequest& q, int64_t steps) const {
    return opt.timing == Timing::kSteps ? q.abort_step <= steps : q.abort_offset_us <= elapsed_us();
  }
};

}  // namespace

ReplayStats replay_in_process(LLM& llm, const std::vector<ReplayRequest>& plan,
                              const ReplayOptions& opt, const std::vector<ReplayMarker>& markers) {
  ReplayStats st;
  const Due due{opt, Clock::now()};
  const int64_t steps0 = llm.stats().steps;
  std::vector<uint64_t> engine_id(plan.size(), 0);
  // Requests to abort, by plan index, in abort order.
  std::vector<size_t> aborts;
  for (size_t i = 0; i < plan.size(); ++i)
    if (plan[i].abort_step >= 0) aborts.push_back(i);
  std::stable_sort(aborts.begin(), aborts.end(), [&](size_t a, size_t b) {
    return opt.timing == Timing::kSteps ? plan[a].abort_step < plan[b].abort_step
                                        : plan[a].abort_offset_us < plan[b].abort_offset_us;
  });
  size_t next = 0, next_abort = 0, finished = 0, next_marker = 0;
  ProgressBar bar("replay", int64_t(plan.size()), opt.progress);
  for (;;) {
    const int64_t steps = llm.stats().steps - steps0;
    // Markers before the arrivals: bench writes "warmup_end" before its timed requests come.
    while (next_marker < markers.size() &&
           (opt.timing == Timing::kSteps ? markers[next_marker].step <= steps
                                         : markers[next_marker].offset_us <= due.elapsed_us()))
      llm.trace_marker(markers[next_marker++].name);
    // As the server's engine loop does between steps: new requests first, then aborts.
    while (next < plan.size() && due.arrival(plan[next], steps)) {
      const ReplayRequest& q = plan[next];
      Prompt p(q.prompt_token_ids);
      p.add_special_tokens = false;
      engine_id[next] = llm.add_request(p, q.params, nullptr, false, &q.origin);
      ++next;
    }
    while (next_abort < aborts.size() && aborts[next_abort] < next &&
           due.abort(plan[aborts[next_abort]], steps)) {
      llm.abort(engine_id[aborts[next_abort]]);
      ++st.aborted;
      ++next_abort;
    }
    if (!llm.is_finished()) {
      for (const RequestOutput& o : llm.step()) {
        st.output_tokens += int64_t(o.token_ids.size());
        if (o.index == 0) ++finished;
      }
      bar.update(int64_t(finished));
      continue;
    }
    if (next == plan.size()) break;  // (aborts still listed target finished requests)
    if (opt.timing == Timing::kSteps) {
      // Idle before the step the next request waits for: that step can never come (the
      // recording's engine had work this one has not), so it arrives now.
      const ReplayRequest& q = plan[next];
      Prompt p(q.prompt_token_ids);
      p.add_special_tokens = false;
      engine_id[next] = llm.add_request(p, q.params, nullptr, false, &q.origin);
      ++next;
      continue;
    }
    const double wait_us = (plan[next].offset_us - due.elapsed_us()) / opt.speed;
    if (wait_us > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(int64_t(std::min(wait_us, 1e5))));
  }
  // Outputs of aborted requests also come back from step() (final events): counted above.
  bar.finish();
  st.requests = int64_t(plan.size());
  st.steps = llm.stats().steps - steps0;
  st.seconds = std::chrono::duration<double>(Clock::now() - due.start).count();
  return st;
}

}  // namespace nanovllm::replay
