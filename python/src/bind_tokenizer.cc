// The engine's Hugging Face-compatible tokenizer (src/tokenizer) and the chat-template renderer.
// The Python wrapper (nanovllm/tokenizer.py) adds HF's method signatures on top.
// Tokenizer methods are const and thread-safe, so they run without the GIL.
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include "bindings.h"
#include "chat/chat_template.h"
#include "convert.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace nanovllm::pyb {

void bind_tokenizer(py::module_& m) {
  using T = Tokenizer;
  using release = py::call_guard<py::gil_scoped_release>;
  py::class_<T>(m, "Tokenizer", "tokenizer.json (+ tokenizer_config.json) of a model directory.")
      .def_static("from_dir", &T::from_dir, py::arg("path"), release(),
                  "Loads <path>/tokenizer.json and, when present, tokenizer_config.json and "
                  "generation_config.json.")
      .def("encode", &T::encode, py::arg("text"), py::arg("add_special_tokens") = true, release())
      .def(
          "decode",
          [](const T& t, const std::vector<int>& ids, bool skip) {
            std::string s;
            {
              py::gil_scoped_release nogil;
              s = t.decode(ids, skip);
            }
            return utf8(s);
          },
          py::arg("ids"), py::arg("skip_special_tokens") = false)
      .def_property_readonly("vocab_size", &T::vocab_size)
      .def("token_to_id", &T::token_to_id, py::arg("token"))
      .def("id_to_token", [](const T& t, int id) { return utf8(t.id_to_token(id)); }, py::arg("id"))
      .def("is_special", &T::is_special, py::arg("id"))
      .def_property_readonly("bos_token_id", &T::bos_token_id)
      .def_property_readonly("eos_token_ids", &T::eos_token_ids)
      .def_property_readonly("bos_token", &T::bos_token)
      .def_property_readonly("eos_token", &T::eos_token)
      .def_property_readonly("chat_template", &T::chat_template)
      .def_property_readonly("tokenizer_config_json",
                             [](const T& t) { return t.tokenizer_config().dump(); });

  m.def(
      "render_chat_template",
      [](const std::string& template_text, const std::string& context_json) {
        // ordered_json: tool schemas keep their key order through `tojson`, as in Python jinja2.
        nlohmann::ordered_json ctx;
        try {
          ctx = nlohmann::ordered_json::parse(context_json);
        } catch (const nlohmann::json::exception& e) {
          throw py::value_error(std::string("chat template context is not valid JSON: ") + e.what());
        }
        py::gil_scoped_release nogil;
        try {
          return render_chat_template(template_text, ctx);
        } catch (const Error& e) {  // template syntax errors and raise_exception(msg)
          throw py::value_error(e.what());
        }
      },
      py::arg("template"), py::arg("context_json"),
      "Renders a Jinja chat template with a JSON object as its context (transformers' "
      "semantics: trim_blocks, lstrip_blocks, raise_exception, tojson, strftime_now).");
}

}  // namespace nanovllm::pyb
