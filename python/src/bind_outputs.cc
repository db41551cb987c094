// Read-only result types: RequestOutput, StreamDelta, CompletionEvent, TokenLogprob(s), EngineStats,
// StepStats.
// Each gets a `fields` tuple and to_dict(); text goes through utf8() (U+FFFD, never a
// UnicodeDecodeError).
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "convert.h"
#include "nanovllm/request_output.h"
#include "nanovllm/stats.h"

namespace nanovllm::pyb {

namespace {

// Collects field names while defining read-only properties, then adds `fields`, to_dict() and
// __repr__ from them.
template <class T>
class ReadOnly {
 public:
  ReadOnly(py::module_& m, const char* name, const char* doc) : cls_(m, name, doc), name_(name) {}

  template <class M>
  ReadOnly& field(const char* n, M T::*member) {
    cls_.def_readonly(n, member);
    names_.emplace_back(n);
    return *this;
  }
  ReadOnly& text(const char* n, std::string T::*member) {
    cls_.def_property_readonly(n, [member](const T& t) { return utf8(t.*member); });
    names_.emplace_back(n);
    return *this;
  }
  void done() {
    py::tuple names(names_.size());
    for (size_t i = 0; i < names_.size(); ++i) names[i] = py::str(names_[i]);
    cls_.attr("fields") = names;
    cls_.def("to_dict", [names](py::object self) {
      py::dict d;
      for (py::handle n : names) {
        py::object v = self.attr(n);
        if (py::hasattr(v, "to_dict")) v = v.attr("to_dict")();
        if (py::isinstance<py::list>(v)) {  // lists of bound objects (logprobs)
          py::list l;
          for (py::handle x : v) l.append(py::hasattr(x, "to_dict") ? x.attr("to_dict")() : x);
          v = l;
        }
        d[n] = v;
      }
      return d;
    });
    const std::string name = name_;
    cls_.def("__repr__", [name](py::object self) {
      return name + py::repr(self.attr("to_dict")()).cast<std::string>();
    });
  }

 private:
  py::class_<T> cls_;
  std::string name_;
  std::vector<std::string> names_;
};

}  // namespace

void bind_outputs(py::module_& m) {
  ReadOnly<TokenLogprob>(m, "TokenLogprob", "A candidate token and its logprob.")
      .field("token_id", &TokenLogprob::token_id)
      .field("logprob", &TokenLogprob::logprob)
      .done();
  ReadOnly<TokenLogprobs>(m, "TokenLogprobs",
                          "Per generated token: its logprob and the top-N alternatives.")
      .field("logprob", &TokenLogprobs::logprob)
      .field("top", &TokenLogprobs::top)
      .field("rank", &TokenLogprobs::rank)
      .done();
  ReadOnly<RequestOutput>(m, "RequestOutput", "A finished request.")
      .field("request_id", &RequestOutput::request_id)
      .field("index", &RequestOutput::index)
      .field("prompt_token_ids", &RequestOutput::prompt_token_ids)
      .field("token_ids", &RequestOutput::token_ids)
      .text("text", &RequestOutput::text)
      .field("finished", &RequestOutput::finished)
      .field("finish_reason", &RequestOutput::finish_reason)
      .text("stop_reason", &RequestOutput::stop_reason)
      .text("error", &RequestOutput::error)
      .field("num_cached_tokens", &RequestOutput::num_cached_tokens)
      .field("logprobs", &RequestOutput::logprobs)
      .field("embedding", &RequestOutput::embedding)
      .field("prompt_logprobs", &RequestOutput::prompt_logprobs)
      .done();
  ReadOnly<StreamDelta>(m, "StreamDelta", "Output of a streaming request new since its last delta.")
      .field("request_id", &StreamDelta::request_id)
      .field("index", &StreamDelta::index)
      .field("token_ids", &StreamDelta::token_ids)
      .text("text", &StreamDelta::text)
      .field("logprobs", &StreamDelta::logprobs)
      .field("finished", &StreamDelta::finished)
      .field("finish_reason", &StreamDelta::finish_reason)
      .text("stop_reason", &StreamDelta::stop_reason)
      .text("error", &StreamDelta::error)
      .field("num_prompt_tokens", &StreamDelta::num_prompt_tokens)
      .field("num_generated_tokens", &StreamDelta::num_generated_tokens)
      .field("num_cached_tokens", &StreamDelta::num_cached_tokens)
      .field("embedding", &StreamDelta::embedding)
      .done();
  ReadOnly<CompletionEvent>(m, "CompletionEvent",
                            "One event of one completion: what is new (delta), the whole output once it "
                            "finished (output, else None), and whether the request has no more events.")
      .field("delta", &CompletionEvent::delta)
      .field("output", &CompletionEvent::output)
      .field("request_finished", &CompletionEvent::request_finished)
      .done();
  ReadOnly<StepStats>(m, "StepStats", "What the last step() did.")
      .field("num_seqs", &StepStats::num_seqs)
      .field("num_prefill_tokens", &StepStats::num_prefill_tokens)
      .field("num_decode_tokens", &StepStats::num_decode_tokens)
      .field("num_preempted", &StepStats::num_preempted)
      .field("num_spec_tokens", &StepStats::num_spec_tokens)
      .field("num_accepted_tokens", &StepStats::num_accepted_tokens)
      .field("num_blocks_used", &StepStats::num_blocks_used)
      .field("seconds", &StepStats::seconds)
      .done();
  using E = EngineStats;
  ReadOnly<E>(m, "EngineStats", "Cumulative engine statistics (and current queue/cache state).")
      .field("steps", &E::steps)
      .field("prefill_tokens", &E::prefill_tokens)
      .field("decode_tokens", &E::decode_tokens)
      .field("prompt_tokens", &E::prompt_tokens)
      .field("prefix_cache_hit_tokens", &E::prefix_cache_hit_tokens)
      .field("prefix_cache_query_tokens", &E::prefix_cache_query_tokens)
      .field("preemptions", &E::preemptions)
      .field("finished_requests", &E::finished_requests)
      .field("aborted_requests", &E::aborted_requests)
      .field("failed_requests", &E::failed_requests)
      .field("max_batch_size", &E::max_batch_size)
      .field("num_blocks_total", &E::num_blocks_total)
      .field("num_blocks_used", &E::num_blocks_used)
      .field("peak_blocks_used", &E::peak_blocks_used)
      .field("num_running", &E::num_running)
      .field("num_waiting", &E::num_waiting)
      .field("prefill_seconds", &E::prefill_seconds)
      .field("decode_seconds", &E::decode_seconds)
      .field("executor", &E::executor)
      .field("graph_pool_bytes", &E::graph_pool_bytes)
      .field("graph_steps", &E::graph_steps)
      .field("spec_draft_tokens", &E::spec_draft_tokens)
      .field("spec_accepted_tokens", &E::spec_accepted_tokens)
      .field("spec_verifications", &E::spec_verifications)
      .field("num_threads", &E::num_threads)
      .done();
}

}  // namespace nanovllm::pyb
