// The pieces of the nanovllm._core extension module, one bind_* function per file.
#pragma once
#include <pybind11/pybind11.h>

namespace nanovllm::pyb {

namespace py = pybind11;

void bind_params(py::module_& m);     // SamplingParams, Config
void bind_outputs(py::module_& m);    // RequestOutput, StreamDelta, TokenLogprobs, EngineStats, StepStats
void bind_tokenizer(py::module_& m);  // Tokenizer, render_chat_template
void bind_engine(py::module_& m);     // Engine (the C++ LLM)
void bind_progress(py::module_& m);   // ProgressBar (fallback when tqdm is absent)
void bind_worker(py::module_& m);     // run_worker: a tensor-parallel rank > 0

}  // namespace nanovllm::pyb
