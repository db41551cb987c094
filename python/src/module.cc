// nanovllm._core: the C++ engine as a Python extension module. The public Python API is the
// nanovllm package (python/nanovllm/), which wraps these classes.
//
// Errors: nanovllm::Error raised by the engine becomes nanovllm.NanoVLLMError (a RuntimeError)
// with the C++ message; invalid arguments (SamplingParams/Config values, prompt ids, chat
// template errors) are ValueError, wrong types TypeError.
#include "bindings.h"
#include "util/check.h"

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  namespace pyb = nanovllm::pyb;
  m.doc() = "nanovllm C++ engine bindings (use the nanovllm package, not this module)";

  py::register_exception<nanovllm::Error>(m, "NanoVLLMError", PyExc_RuntimeError);

  pyb::bind_params(m);
  pyb::bind_outputs(m);
  pyb::bind_tokenizer(m);
  pyb::bind_engine(m);
  pyb::bind_progress(m);
  pyb::bind_worker(m);
}
