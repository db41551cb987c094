// The tracer's own cost per step, without a model: a real Scheduler runs N sequences (prompt 128
// tokens, 64 generated each, ignore_eos) to completion, and every step goes through the same
// EngineTracer hooks LLMEngine calls (events formatted and written, to /dev/null by default).
// Prints, per batch size, the hooks' time per step (median over steps of a run, best of 5 runs)
// next to the scheduler's own schedule + postprocess time, so it can be set against a model's
// step time (e.g. from `bench --trace` or `trace-view --json`: busy_seconds / steps).
//   build/bench/bench_trace_overhead [--out FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_tracer.h"
#include "engine/scheduler.h"
#include "engine/stop_checker.h"

using namespace nanovllm;
using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Returns {tracer us per step, scheduler us per step} (medians over the decode-heavy run).
std::pair<double, double> run(int num_seqs, const std::string& out, bool traced) {
  SchedulerConfig sc;
  sc.max_num_seqs = 512;
  sc.max_num_batched_tokens = 16384;
  sc.block_size = 16;
  sc.num_kvcache_blocks = num_seqs * 13 + 16;  // (128 + 64) / 16 + 1 per sequence: no preemption
  sc.max_model_len = 4096;
  Scheduler sched(sc);
  Config cfg;
  cfg.model = "synthetic";
  cfg.num_kvcache_blocks = sc.num_kvcache_blocks;
  std::unique_ptr<EngineTracer> tracer;
  if (traced) tracer = std::make_unique<EngineTracer>(out, cfg);
  SamplingParams sp;
  sp.max_tokens = 64;
  sp.ignore_eos = true;
  std::vector<std::unique_ptr<Sequence>> seqs;  // the scheduler does not own them (the engine's requests do)
  for (int i = 0; i < num_seqs; ++i) {
    std::vector<int> prompt(128);
    for (int k = 0; k < 128; ++k) prompt[size_t(k)] = (i * 131 + k) % 30000 + 3;
    if (tracer) tracer->arrived(uint64_t(i), 128);
    seqs.push_back(std::make_unique<Sequence>(uint64_t(i), prompt, sp, sc.block_size));
    sched.add(seqs.back().get());
  }
  std::vector<double> trace_us, sched_us;
  while (!sched.is_finished()) {
    double tr = 0;
    auto t = Clock::now();
    if (tracer) tracer->step_begin();
    SchedulerOutput so = sched.schedule();
    double s_us = us_since(t);
    t = Clock::now();
    if (tracer) {
      tracer->scheduled(so, sched);
      tracer->mark(StepMark::kPrepared);
      tracer->mark(StepMark::kForwarded);
      tracer->mark(StepMark::kSampled);
    }
    tr += us_since(t);
    std::vector<int> tokens;
    for (const auto& ss : so.seqs)
      if (ss.sample) tokens.push_back(7);
    t = Clock::now();
    auto finished = sched.postprocess(so, tokens, [&](Sequence& seq, int token, size_t) {
      return token_stop_reason(seq, token, {}, sched.max_seq_len());
    });
    s_us += us_since(t);
    t = Clock::now();
    if (tracer) {
      for (const Sequence* f : finished) tracer->finished(f->seq_id, "length");
      tracer->step_end(so, sched);
    }
    tr += us_since(t);
    trace_us.push_back(tr);
    sched_us.push_back(s_us);
  }
  if (tracer) tracer->close(EngineStats{});
  return {median(trace_us), median(sched_us)};
}

}  // namespace

int main(int argc, char** argv) {
  std::string out = "/dev/null";
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--out")) out = argv[i + 1];
  std::printf("tracer hooks per step (median over the steps of a run, best of 5 runs), trace -> %s\n",
              out.c_str());
  std::printf("%8s %16s %22s\n", "seqs", "tracer us/step", "scheduler us/step");
  for (int n : {1, 8, 32, 128, 256, 512}) {
    double best_tr = 1e30, best_sched = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      best_tr = std::min(best_tr, run(n, out, true).first);
      best_sched = std::min(best_sched, run(n, out, false).second);
    }
    std::printf("%8d %16.2f %22.2f\n", n, best_tr, best_sched);
  }
  return 0;
}
