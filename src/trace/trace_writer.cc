#include "trace/trace_writer.h"

#include <cerrno>
#include <cstring>

#include "util/check.h"

namespace nanovllm::trace {

TraceWriter::TraceWriter(const std::string& path, size_t flush_bytes)
    : path_(path), flush_bytes_(flush_bytes) {
  NV_CHECK(!path.empty(), "trace path is empty");
  file_ = std::fopen(path.c_str(), "wb");
  NV_CHECK(file_ != nullptr, "cannot open trace file '", path,
           "' for writing: ", std::strerror(errno));
  buf_.reserve(flush_bytes_ + (flush_bytes_ >> 2));
  buf_ += "[\n";
}

TraceWriter::~TraceWriter() { close(); }

JsonStream& TraceWriter::begin_event(char ph, std::string_view name, std::string_view cat, int tid,
                                     double ts_us) {
  if (num_events_ > 0) buf_ += ",\n";
  js_.reset();
  js_.begin_object();
  js_.field("name", name).field("cat", cat);
  const char phs[2] = {ph, 0};
  js_.field("ph", std::string_view(phs, 1));
  js_.field("ts", ts_us, 3).field("pid", 1).field("tid", tid);
  ++num_events_;
  return js_;
}

void TraceWriter::end_event() {
  js_.end_object();
  NV_CHECK(js_.balanced(), "trace event left an object or array open");
  if (buf_.size() >= flush_bytes_ || !file_) write_out();  // closed: drop
}

void TraceWriter::write_out() {
  if (file_ && !failed_ && !buf_.empty()) {
    if (std::fwrite(buf_.data(), 1, buf_.size(), file_) != buf_.size() || std::fflush(file_) != 0) {
      failed_ = true;
      std::fprintf(stderr, "nanovllm: writing trace file '%s' failed (%s): tracing stopped\n",
                   path_.c_str(), std::strerror(errno));
    }
  }
  buf_.clear();
}

void TraceWriter::flush() { write_out(); }

void TraceWriter::close() {
  if (!file_) return;
  buf_ += "\n]\n";
  write_out();
  if (std::fclose(file_) != 0 && !failed_) {
    failed_ = true;
    std::fprintf(stderr, "nanovllm: closing trace file '%s' failed (%s)\n", path_.c_str(),
                 std::strerror(errno));
  }
  file_ = nullptr;
}

}  // namespace nanovllm::trace
