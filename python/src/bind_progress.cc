// The engine's terminal progress bar (src/util/progress.h), used by nanovllm.LLM.generate when
// tqdm is not installed. It draws on file descriptor 2 only when that is a terminal.
#include "bindings.h"
#include "util/progress.h"

namespace nanovllm::pyb {

void bind_progress(py::module_& m) {
  py::class_<ProgressBar>(m, "ProgressBar", "A one-line progress bar on stderr (a terminal).")
      .def(py::init<std::string, int64_t, bool>(), py::arg("label"), py::arg("total"),
           py::arg("enabled") = true)
      .def("update", &ProgressBar::update, py::arg("done"), py::arg("extra") = "",
           "Redraws with `done` of `total` finished (at most every 100 ms).")
      .def("finish", &ProgressBar::finish, "Ends the line; later updates draw nothing.");
}

}  // namespace nanovllm::pyb
