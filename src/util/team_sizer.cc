#include "util/team_sizer.h"

#include <algorithm>

namespace nanovllm {

void TeamSizer::new_window(int64_t now_ns) {
  regions_ = strikes_ = worst_ = 0;
  lost_ns_ = 0;
  window_start_ns_ = now_ns;
}

void TeamSizer::shrink(int64_t now_ns) {
  team_ = std::max(1, team_ - std::max(1, worst_));
  // A probe that found the contention still there waits twice as long.
  if (probing_) backoff_ns_ = std::min(kMaxBackoffNs, backoff_ns_ * 2);
  reduced_until_ns_ = now_ns + backoff_ns_;
  ++reductions_;
  probing_ = false;
  new_window(now_ns);
}

void TeamSizer::record(int team, const int64_t* start_delay_ns, int64_t now_ns) {
  if (!adaptive_ || team <= 1) return;
  if (window_start_ns_ < 0) window_start_ns_ = now_ns;
  ++regions_;
  int late = 0;
  int64_t lost = 0;
  for (int i = 0; i + 1 < team; ++i) {
    late += start_delay_ns[i] > kLateNs;
    lost = std::max(lost, start_delay_ns[i] - kGraceNs);
  }
  lost_ns_ += lost;
  if (late > 0) {
    ++strikes_;
    worst_ = std::max(worst_, late);
  } else if (lost > 0) {
    worst_ = std::max(worst_, 1);
  }
  if (strikes_ >= kStrikes) return shrink(now_ns);
  if (regions_ >= kWindow) {
    if (lost_ns_ * kLostFraction > now_ns - window_start_ns_) return shrink(now_ns);
    if (probing_ && strikes_ == 0) backoff_ns_ = kBaseBackoffNs;  // the contention is gone
    probing_ = false;
    new_window(now_ns);
  }
}

}  // namespace nanovllm
