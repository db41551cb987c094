#include "util/progress.h"

#include <unistd.h>

#include <cstdio>

namespace nanovllm {

ProgressBar::ProgressBar(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled && isatty(2)) {
  start_ = last_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(int64_t done, const std::string& extra) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  double el = std::chrono::duration<double>(now - start_).count();
  double eta = done > 0 ? el * double(total_ - done) / double(done) : 0;
  const int width = 30;
  int filled = total_ > 0 ? int(width * done / total_) : width;
  std::string bar(size_t(filled), '#');
  bar.resize(size_t(width), '.');
  std::fprintf(stderr, "\r%s [%s] %lld/%lld %.1fs eta %.1fs %s\x1b[K", label_.c_str(), bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_), el, eta, extra.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (enabled_ && drawn_) {
    std::fprintf(stderr, "\n");
    drawn_ = false;
  }
  enabled_ = false;
}

}  // namespace nanovllm
