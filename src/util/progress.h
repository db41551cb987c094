// A one-line progress bar on stderr: done/total, elapsed, ETA and free-form rates. Drawn only
// when enabled and stderr is a terminal; redrawn at most every 100 ms.
#pragma once
#include <chrono>
#include <string>

namespace nanovllm {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, bool enabled);
  ~ProgressBar();
  void update(int64_t done, const std::string& extra = "");
  void finish();

 private:
  std::string label_;
  int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace nanovllm
