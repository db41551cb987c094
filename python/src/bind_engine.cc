// Engine: the C++ nanovllm::LLM behind a mutex. Every call releases the GIL first and then takes
// the mutex, so Python threads may share one engine (the LLM is thread-compatible, not
// thread-safe) and other Python threads run while a step computes. Generation loops live in
// Python (nanovllm/llm.py) so KeyboardInterrupt lands between steps.
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "bindings.h"
#include "nanovllm/llm.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace nanovllm::pyb {

namespace {

class Engine {
 public:
  explicit Engine(const Config& c) : llm_(c) {}

  // Runs fn(llm) under the engine mutex.
  template <class F>
  auto locked(F&& fn) {
    std::lock_guard<std::mutex> g(mu_);
    return fn(llm_);
  }
  // Immutable after construction: no lock.
  const Tokenizer* tokenizer() const { return llm_.tokenizer(); }

 private:
  std::mutex mu_;
  LLM llm_;
};

using PromptArg = std::variant<std::string, std::vector<int>>;

}  // namespace

void bind_engine(py::module_& m) {
  using release = py::call_guard<py::gil_scoped_release>;
  py::class_<EventQueue, std::shared_ptr<EventQueue>>(
      m, "EventQueue", "A request's events (CompletionEvent), queued by the engine until taken.")
      .def(py::init<>())
      .def("take", &EventQueue::take, release(), "The events queued so far, in order (and empties the queue).")
      .def("empty", &EventQueue::empty);
  py::class_<Engine>(m, "Engine", "The C++ engine (nanovllm::LLM); nanovllm.LLM wraps it.")
      .def(py::init([](const Config& c) {
             try {
               c.validate();
             } catch (const Error& e) {
               throw py::value_error(e.what());
             }
             return new Engine(c);
           }),
           py::arg("config"), release())
      .def(
          "add_request",
          [](Engine& e, const PromptArg& prompt, const SamplingParams& sp, std::shared_ptr<EventQueue> queue,
             bool stream, bool add_special_tokens) {
            Prompt p = std::visit([](const auto& v) { return Prompt(v); }, prompt);
            p.add_special_tokens = add_special_tokens;
            try {  // invalid params or prompt ids: the caller's fault
              return e.locked([&](LLM& llm) { return llm.add_request(p, sp, queue, stream); });
            } catch (const Error& err) {
              throw py::value_error(err.what());
            }
          },
          py::arg("prompt"), py::arg("sampling_params"), py::arg("queue") = nullptr, py::arg("stream") = false,
          py::arg("add_special_tokens") = true, release(),
          "Enqueues a request (text or token ids); returns its id. Its events go to `queue` (an "
          "EventQueue; with stream=False only final ones); without a queue step() returns its final "
          "outputs. A prompt that can never run ends at once with finish_reason 'error'.")
      .def("step", [](Engine& e) { return e.locked([](LLM& llm) { return llm.step(); }); },
           release(),
           "One scheduling + forward + sampling step; returns the final outputs of requests added "
           "without a queue.")
      .def("is_finished", [](Engine& e) { return e.locked([](LLM& l) { return l.is_finished(); }); },
           release())
      .def("abort", [](Engine& e, uint64_t id) { e.locked([id](LLM& l) { l.abort(id); }); },
           py::arg("request_id"), release())
      .def("abort_all", [](Engine& e) { e.locked([](LLM& l) { l.abort_all(); }); }, release())
      .def("stats", [](Engine& e) { return e.locked([](LLM& l) { return l.stats(); }); }, release())
      .def("last_step_stats",
           [](Engine& e) { return e.locked([](LLM& l) { return l.last_step_stats(); }); }, release())
      .def("config", [](Engine& e) { return e.locked([](LLM& l) { return l.config(); }); },
           release(), "The configuration after clipping and KV-cache sizing.")
      .def("eos_token_ids",
           [](Engine& e) { return e.locked([](LLM& l) { return l.eos_token_ids(); }); }, release())
      .def("tokenizer", &Engine::tokenizer, py::return_value_policy::reference_internal,
           "The model's tokenizer (kept alive with the engine), or None without tokenizer.json.");
}

}  // namespace nanovllm::pyb
