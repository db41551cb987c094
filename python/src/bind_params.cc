// SamplingParams and Config as Python classes with keyword constructors. Both validate on
// construction (the C++ validate(): ValueError with its message); setters check types only, and
// the engine validates again when a request is added.
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
Field<StructuredOutputsParams> json_text_field(const char* name,
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
std::vector<Field<StructuredOutputsParams>> structured_fields() {
  using O = StructuredOutputsParams;
  const char* o = "StructuredOutputsParams";
  return {json_text_field("json", &O::json),
          field(o, "regex", &O::regex),
          field(o, "choice", &O::choice),
          field(o, "json_object", &O::json_object),
          json_text_field("tools", &O::tools),
          field(o, "tool_name", &O::tool_name),
          field(o, "disable_any_whitespace", &O::disable_any_whitespace)};
}

// SamplingParams.structured_outputs: a StructuredOutputsParams, a dict of its fields, or None
// (no constraint).
Field<SamplingParams> structured_outputs_field() {
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

// nano-vLLM's three fields first, in its order, so SamplingParams(0.6, 256) means the same.
std::vector<Field<SamplingParams>> sampling_fields() {
  using S = SamplingParams;
  const char* o = "SamplingParams";
  return {field(o, "temperature", &S::temperature),
          field(o, "max_tokens", &S::max_tokens),
          field(o, "ignore_eos", &S::ignore_eos),
          field(o, "top_k", &S::top_k),
          field(o, "top_p", &S::top_p),
          field(o, "min_p", &S::min_p),
          field(o, "seed", &S::seed),
          field(o, "min_tokens", &S::min_tokens),
          field(o, "stop", &S::stop),
          field(o, "stop_token_ids", &S::stop_token_ids),
          field(o, "logprobs", &S::logprobs),
          field(o, "presence_penalty", &S::presence_penalty),
          field(o, "frequency_penalty", &S::frequency_penalty),
          field(o, "repetition_penalty", &S::repetition_penalty),
          field(o, "logit_bias", &S::logit_bias),
          field(o, "skip_special_tokens", &S::skip_special_tokens),
          field(o, "n", &S::n),
          structured_outputs_field()};
}

// BackendOptions (nanovllm/backend_options.h); linear_path by name.
std::vector<Field<BackendOptions>> backend_fields() {
  using B = BackendOptions;
  const char* o = "BackendOptions";
  static const char* const kPaths[] = {"auto", "streaming", "blas", "onednn"};
  Field<BackendOptions> linear_path{
      "linear_path",
      [](B& b, py::handle h) {
        const std::string v = from_py<std::string>(h, {"BackendOptions", "linear_path"});
        for (int i = 0; i < 4; ++i)
          if (v == kPaths[i]) return void(b.linear_path = LinearPath(i));
        throw py::value_error("BackendOptions.linear_path must be auto | streaming | blas | onednn, got '" + v + "'");
      },
      [](const B& b) { return py::object(py::str(kPaths[int(b.linear_path)])); }};
  return {field(o, "num_threads", &B::num_threads),
          field(o, "spin_us", &B::spin_us),
          field(o, "adaptive_threads", &B::adaptive_threads),
          field(o, "cpu_weight_copy", &B::cpu_weight_copy),
          linear_path,
          field(o, "isa", &B::isa),
          field(o, "cuda_prefill", &B::cuda_prefill),
          field(o, "cuda_decode", &B::cuda_decode)};
}

// Config.backend holds a copy: assign a whole BackendOptions (cfg.backend = BackendOptions(...)).
Field<Config> backend_field() {
  return {"backend",
          [](Config& c, py::handle h) {
            if (!py::isinstance<BackendOptions>(h))
              throw py::type_error("Config.backend must be a BackendOptions");
            c.backend = h.cast<BackendOptions>();
          },
          [](const Config& c) { return py::cast(c.backend); }};
}

// nano-vLLM's Config fields first (model, ..., num_kvcache_blocks), then nanovllm's.
std::vector<Field<Config>> config_fields() {
  using C = Config;
  const char* o = "Config";
  return {field(o, "model", &C::model),
          field(o, "max_num_batched_tokens", &C::max_num_batched_tokens),
          field(o, "max_num_seqs", &C::max_num_seqs),
          field(o, "max_model_len", &C::max_model_len),
          field(o, "gpu_memory_utilization", &C::gpu_memory_utilization),
          field(o, "tensor_parallel_size", &C::tensor_parallel_size),
          field(o, "dist_init_addr", &C::dist_init_addr),
          field(o, "worker_command", &C::worker_command),
          field(o, "dist_timeout_s", &C::dist_timeout_s),
          field(o, "enforce_eager", &C::enforce_eager),
          field(o, "kvcache_block_size", &C::kvcache_block_size),
          field(o, "num_kvcache_blocks", &C::num_kvcache_blocks),
          field(o, "cpu_kvcache_bytes", &C::cpu_kvcache_bytes),
          field(o, "cpu_kvcache_fraction", &C::cpu_kvcache_fraction),
          field(o, "device", &C::device),
          field(o, "policy", &C::policy),
          field(o, "enable_prefix_caching", &C::enable_prefix_caching),
          field(o, "num_threads", &C::num_threads),
          field(o, "max_waiting", &C::max_waiting),
          field(o, "trace_path", &C::trace_path),
          field(o, "quantization", &C::quantization),
          field(o, "lm_head_quantization", &C::lm_head_quantization),
          field(o, "kv_cache_dtype", &C::kv_cache_dtype),
          backend_field()};
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

template <class T>
void bind_struct(py::module_& m, const char* name, const char* doc,
                 const std::vector<Field<T>>& fields) {
  py::class_<T> cls(m, name, doc);
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
  // Bound first: SamplingParams.structured_outputs returns one.
  bind_struct<StructuredOutputsParams>(
      m, "StructuredOutputsParams",
      "Constrained decoding (vLLM's names), at most one of: json (a JSON schema: str or dict), "
      "regex, choice (list of str), json_object=True, tools (OpenAI tools list: str or list; "
      "tool_name picks one function). StructuredOutputsParams(json='', regex='', choice=[], "
      "json_object=False, tools='', tool_name='', disable_any_whitespace=False).",
      structured_fields());
  bind_struct<SamplingParams>(
      m, "SamplingParams",
      "Per-request sampling: SamplingParams(temperature=1.0, max_tokens=64, ignore_eos=False, "
      "top_k=-1, top_p=1.0, min_p=0.0, seed=None, min_tokens=0, stop=[], stop_token_ids=[], "
      "logprobs=-1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, "
      "logit_bias={}, skip_special_tokens=True, n=1, structured_outputs=None). temperature 0 "
      "is greedy; n > 1 samples n completions of each prompt (the prompt's prefill shared).",
      sampling_fields());
  bind_struct<BackendOptions>(
      m, "BackendOptions",
      "How the backend runs its kernels: BackendOptions(num_threads=0, spin_us=2000, "
      "adaptive_threads=True, cpu_weight_copy=True, linear_path='auto', isa='', "
      "cuda_prefill='simple', cuda_decode='v1'). Config.backend's defaults come from the NANOVLLM_* environment.",
      backend_fields());
  bind_struct<Config>(m, "Config",
                      "Engine configuration (nano-vLLM's field names and defaults, plus "
                      "nanovllm's device, policy, ...). Config(model, **fields).",
                      config_fields());
}

}  // namespace nanovllm::pyb
