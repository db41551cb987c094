// SamplingParams and Config as Python classes with keyword constructors. Both validate on
// construction (the C++ validate(): ValueError with its message); setters check types only, and
// the engine validates again when a request is added.
#include <optional>

#include "bindings.h"
#include "fields.h"
#include "nanovllm/backend_options.h"
#include "nanovllm/config.h"
#include "nanovllm/sampling_params.h"
#include "util/check.h"

namespace nanovllm::pyb {

namespace {

// A JSON document given as text, or as a Python dict / list (serialized with json.dumps; dicts
// keep their key order, which a JSON schema's property order follows).
PyField<StructuredOutputsParams> json_text_field(const char* name,
                                                 std::string StructuredOutputsParams::*member) {
  return {name,
          [name, member](StructuredOutputsParams& so, py::handle h) {
            if (h.is_none())
              (so.*member).clear();
            else if (py::isinstance<py::dict>(h) || py::isinstance<py::list>(h))
              so.*member = py::module_::import("json").attr("dumps")(h).cast<std::string>();
            else
              so.*member = from_py<std::string>(h, {"StructuredOutputsParams", name});
          },
          [member](const StructuredOutputsParams& so) { return py::object(py::str(so.*member)); }};
}

// vLLM's StructuredOutputsParams names (nanovllm/sampling_params.h).
std::vector<PyField<StructuredOutputsParams>> structured_fields() {
  using O = StructuredOutputsParams;
  auto fields = table_fields<O>("StructuredOutputsParams");
  override_field(fields, json_text_field("json", &O::json));
  override_field(fields, json_text_field("tools", &O::tools));
  return fields;
}

// SamplingParams.structured_outputs: a StructuredOutputsParams, a dict of its fields, or None
// (no constraint).
PyField<SamplingParams> structured_outputs_field() {
  return {"structured_outputs",
          [](SamplingParams& sp, py::handle h) {
            if (h.is_none()) {
              sp.structured_outputs = {};
            } else if (py::isinstance<StructuredOutputsParams>(h)) {
              sp.structured_outputs = h.cast<StructuredOutputsParams>();
            } else if (py::isinstance<py::dict>(h)) {
              StructuredOutputsParams so;
              assign_fields(so, structured_fields(), "StructuredOutputsParams", py::args(),
                            py::reinterpret_borrow<py::kwargs>(h));
              sp.structured_outputs = so;
            } else {
              throw py::type_error(
                  "SamplingParams.structured_outputs must be a StructuredOutputsParams, a dict of "
                  "its fields or None, got " + type_name(h));
            }
          },
          [](const SamplingParams& sp) -> py::object {
            if (sp.structured_outputs.empty()) return py::none();
            return py::cast(sp.structured_outputs);
          }};
}

std::vector<PyField<SamplingParams>> sampling_fields() {
  auto fields = table_fields<SamplingParams>("SamplingParams");
  override_field(fields, structured_outputs_field());
  return fields;
}

// validate() as a ValueError carrying the C++ message.
template <class T>
void validate_or_value_error(const T& t) {
  try {
    t.validate();
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

// StructuredOutputsParams has no validate() of its own: SamplingParams checks it (one
// constraint at most, tool_name only with tools). A grammar the engine cannot compile is
// reported when the request is added.
void validate_or_value_error(const StructuredOutputsParams& so) {
  SamplingParams sp;
  sp.structured_outputs = so;
  validate_or_value_error(sp);
}

// "Name(field=default, ...)": the keyword constructor's signature, from the fields. Config's
// defaults read the NANOVLLM_* environment (Config.backend); when a variable there is malformed
// the signature names the fields without defaults, so that `import nanovllm` still works and
// Config() is where the error is raised.
template <class T>
std::string signature(const char* name, const std::vector<PyField<T>>& fields) {
  std::optional<T> defaults;
  try {
    defaults.emplace();
  } catch (const Error&) {
  }
  std::string s = std::string(name) + "(";
  for (size_t i = 0; i < fields.size(); ++i) {
    s += (i ? ", " : "") + fields[i].name;
    if (defaults) s += "=" + py::repr(fields[i].get(*defaults)).template cast<std::string>();
  }
  return s + ")";
}

template <class T>
void bind_struct(py::module_& m, const char* name, const std::string& doc,
                 const std::vector<PyField<T>>& fields) {
  py::class_<T> cls(m, name, (signature(name, fields) + ". " + doc).c_str());
  cls.def(py::init([fields, name](const py::args& args, const py::kwargs& kwargs) {
    T t;
    assign_fields(t, fields, name, args, kwargs);
    validate_or_value_error(t);
    return t;
  }));
  cls.def("validate", [](const T& t) { validate_or_value_error(t); },
          "Raises ValueError when a field is out of range.");
  def_fields(cls, fields, name);
}

}  // namespace

void bind_params(py::module_& m) {
  // Bound first: SamplingParams.structured_outputs returns one, Config.backend is one.
  bind_struct<StructuredOutputsParams>(
      m, "StructuredOutputsParams",
      "Constrained decoding (vLLM's names), at most one of: json (a JSON schema: str or dict), "
      "regex, choice (list of str), json_object=True, grammar (GBNF / EBNF or Lark text), tools "
      "(OpenAI tools list: str or list; "
      "tool_name picks one function).",
      structured_fields());
  bind_struct<SamplingParams>(
      m, "SamplingParams",
      "Per-request sampling. temperature 0 is greedy; n > 1 samples n completions of each "
      "prompt (the prompt's prefill shared).",
      sampling_fields());
  bind_struct<BackendOptions>(
      m, "BackendOptions",
      "How the backend runs its kernels. Config.backend's defaults come from the NANOVLLM_* "
      "environment.",
      table_fields<BackendOptions>("BackendOptions"));
  bind_struct<Config>(m, "Config",
                      "Engine configuration (nano-vLLM's field names and defaults, plus "
                      "nanovllm's device, policy, ...).",
                      table_fields<Config>("Config"));
}

}  // namespace nanovllm::pyb
