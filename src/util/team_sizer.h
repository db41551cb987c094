// How many threads a parallel region should use: all of the pool's, unless the cores are not
// actually all available (another process keeps one busy).
//
// Why: a parallel region ends when its slowest thread ends. When another process keeps a core
// busy, the pool thread that shares that core is runnable but waits for the scheduler's time
// slice (about 1.5 ms on a 2-CPU Linux 6.x VM), and every region of a decode step (~100-200 of
// 5-500 us each) waits for it: measured 3 us -> 1.5-5 ms per region, 64 stories260K tokens from
// 0.004 s to 13 s. Spinning makes it worse (the spinning thread looks like a CPU hog to the
// scheduler), blocking alone costs a ~100 us idle-core wake-up per region on this VM.
//
// How: the pool timestamps each worker's start of a region. A worker that starts more than
// kLateNs after the caller published the region was descheduled for a time slice; shorter
// delays (partial slices of a loaded machine) add up as lost time. The team shrinks by the
// late workers (2 threads -> the caller runs every region alone) after kStrikes such regions,
// or when the time lost beyond kGraceNs per region exceeds 1/kLostFraction of the wall time of
// a kWindow-region window. It stays small for a back-off period that doubles while probes keep
// finding contention (kBaseBackoffNs .. kMaxBackoffNs) and resets after a clean probe window.
// A probe costs about one late region (a few ms), so steady contention costs ~1% or less.
// Not thread-safe: the pool's single caller drives it.
#pragma once
#include <cstdint>

namespace nanovllm {

class TeamSizer {
 public:
  static constexpr int64_t kLateNs = 400'000;           // longer than an idle-core wake-up
  static constexpr int kStrikes = 1;  // each late region costs a slice: react to the first
  static constexpr int kWindow = 64;
  static constexpr int64_t kBaseBackoffNs = 50'000'000;  // 50 ms
  static constexpr int64_t kMaxBackoffNs = 1'000'000'000;
  static constexpr int64_t kGraceNs = 20'000;            // a spinning worker starts in ~1 us
  static constexpr int kLostFraction = 8;

  // adaptive = false: always max_threads (NANOVLLM_ADAPTIVE_THREADS=0 or tests).
  TeamSizer(int max_threads, bool adaptive) : max_(max_threads), team_(max_threads), adaptive_(adaptive) {}

  // The team for a region starting at now_ns.
  int team(int64_t now_ns) {
    if (team_ < max_ && now_ns >= reduced_until_ns_) {  // back-off over: probe the full team
      team_ = max_;
      probing_ = true;
      new_window(now_ns);
    }
    return team_;
  }
  // After a region run by `team` threads, ending at now_ns, whose workers started
  // start_delay_ns[0 .. team-2] after the caller published it.
  void record(int team, const int64_t* start_delay_ns, int64_t now_ns);
  int current() const { return team_; }
  int64_t reductions() const { return reductions_; }  // times the team was shrunk (stats, tests)

 private:
  int max_, team_;
  bool adaptive_;
  bool probing_ = false;
  void shrink(int64_t now_ns);
  void new_window(int64_t now_ns);
  int regions_ = 0, strikes_ = 0, worst_ = 0;
  int64_t lost_ns_ = 0, window_start_ns_ = -1;
  int64_t reduced_until_ns_ = 0;
  int64_t backoff_ns_ = kBaseBackoffNs;
  int64_t reductions_ = 0;

};

}  // namespace nanovllm
