// Which requests' outputs differ between two runs of the same traffic (two traces recorded with
// --trace-requests: a recording and its replay, or two replays under other flags).
//
// Requests are matched by what they ask (route, prompt token ids, sampling parameters but the
// seed), paired in arrival order when the same request comes several times, so a replay whose
// requests reached the engine in another order (wall-clock timing, a remote server) still
// matches. A pair is compared when its outputs are reproducible: greedy, or the same seed in both.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trace/request_log.h"

namespace nanovllm::trace {

enum class OutputStatus { kEqual, kDifferent, kNotCompared, kOnlyA, kOnlyB };
std::string_view status_name(OutputStatus s);

struct OutputPair {
  OutputStatus status = OutputStatus::kNotCompared;
  uint64_t a_id = 0, b_id = 0;  // request ids in each run (only one is meaningful for kOnly*)
  int index = 0;                // completion index
  std::string note;             // why not compared, or what differs
  int first_difference = -1;    // first token position that differs (-1: none, or by text)
  int a_tokens = 0, b_tokens = 0;
  std::string a_finish, b_finish;
  std::string a_text, b_text;   // the outputs' text (for the page: cut to a snippet there)
};

struct OutputComparison {
  bool available = false;  // both traces hold request records
  int64_t equal = 0, different = 0, not_compared = 0, only_a = 0, only_b = 0;
  std::vector<OutputPair> pairs;  // every completion, in A's arrival order (B-only ones last)
};

OutputComparison compare_outputs(const RequestLog& a, const RequestLog& b);
// Counts, and the first `max_rows` pairs that are not equal.
nlohmann::json to_json(const OutputComparison& c, size_t max_rows = 200);

}  // namespace nanovllm::trace
