// Replays a plan (replay_plan.h) against an in-process engine. The engine records the replay in
// its own --trace file when it has one (with request records, so the replay can itself be
// replayed and compared).
//
// Timing::kSteps releases each request before the engine step it arrived before in the
// recorded run (and aborts what was aborted before the same step): the scheduler sees the same
// arrivals at the same steps, so under the same flags the step count and every scheduling
// decision repeat (docs/determinism.md: the tokens do anyway). Timing::kWall releases requests
// at their recorded wall-clock offsets (divided by `speed`): what a different engine or build
// makes of the same traffic in time, with batches as they happen to form.
#pragma once
#include <cstdint>
#include <vector>

#include "nanovllm/llm.h"
#include "replay/replay_plan.h"

namespace nanovllm::replay {

struct ReplayOptions {
  Timing timing = Timing::kSteps;
  double speed = 1.0;     // kWall: 2 = arrivals twice as fast
  bool progress = false;  // progress bar on stderr (a terminal only)
};

struct ReplayStats {
  int64_t requests = 0, steps = 0, output_tokens = 0, aborted = 0;
  double seconds = 0;
};

// Single-threaded: between steps, writes the markers, releases the requests (and aborts) that
// are due, then steps while there is work, sleeping until the next arrival when idle (kWall).
ReplayStats replay_in_process(LLM& llm, const std::vector<ReplayRequest>& plan,
                              const ReplayOptions& opt, const std::vector<ReplayMarker>& markers = {});

}  // namespace nanovllm::replay
