// TraceWriter: a Chrome Trace Event Format file (the JSON array form that Perfetto and
// chrome://tracing open), written incrementally.
//
// Events are appended to an in-memory buffer that is written to the file whenever it exceeds
// `flush_bytes` (and on flush()/close()), so memory stays bounded however long the process runs
// (a server) and the file on disk is at most one buffer behind. The file is "[\n", then one
// event per line separated by ",\n", then "\n]\n" at close(). A process killed before close()
// leaves the array unterminated, which both viewers accept and `nanovllm trace-view` repairs.
//
// A write error (disk full) is reported once on stderr and stops tracing: the engine keeps
// serving. Not thread-safe: the engine thread owns it.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "trace/json_stream.h"

namespace nanovllm::trace {

class TraceWriter {
 public:
  // Creates/truncates `path` and writes the opening bracket. Throws nanovllm::Error naming the
  // path and the OS error when it cannot be opened.
  explicit TraceWriter(const std::string& path, size_t flush_bytes = size_t(1) << 20);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Starts {"name","cat","ph","ts","pid":1,"tid"}; append further fields (dur, id, args) to
  // the returned stream, then call end_event(). `ts_us` is in microseconds.
  JsonStream& begin_event(char ph, std::string_view name, std::string_view cat, int tid,
                          double ts_us);
  void end_event();
  void flush();
  // Terminates the array and closes the file. Idempotent; later events are dropped.
  void close();

  const std::string& path() const { return path_; }
  int64_t num_events() const { return num_events_; }
  bool ok() const { return file_ != nullptr && !failed_; }

 private:
  void write_out();
  std::string path_;
  std::FILE* file_ = nullptr;
  std::string buf_;
  JsonStream js_{buf_};
  size_t flush_bytes_;
  int64_t num_events_ = 0;
  bool failed_ = false;
};

}  // namespace nanovllm::trace
