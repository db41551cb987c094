// Strict Python -> C++ conversions for the binding's keyword-argument structs (SamplingParams,
// Config). A wrong type is a TypeError and a value C++ cannot hold (an int beyond int32) a
// ValueError, both naming the field ("SamplingParams.max_tokens") and what was given. Value
// ranges are checked by the structs' own validate(), not here.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nanovllm::pyb {

namespace py = pybind11;

// Which field a value is for, for error messages.
struct FieldRef {
  const char* owner;  // "SamplingParams"
  const char* name;   // "temperature"
};

// Python bool or numpy.bool_.
bool is_bool(py::handle h);
// int or any object with __index__ (numpy integers), but not bool.
bool is_integer(py::handle h);
// Type name of a Python object, for messages ("str", "float", "NoneType").
std::string type_name(py::handle h);
// Python str from UTF-8 bytes; invalid bytes become U+FFFD (as HF decode does) instead of
// raising UnicodeDecodeError.
py::str utf8(const std::string& s);

template <class T>
T from_py(py::handle h, FieldRef f);

// C++ -> Python for field getters. A float field reads back as the shortest decimal that
// round-trips its float32 value (0.6f -> 0.6, not 0.6000000238418579).
template <class T>
py::object to_py(const T& v) {
  return py::cast(v);
}
template <> py::object to_py<float>(const float& v);
template <> py::object to_py<std::map<int, float>>(const std::map<int, float>& v);

template <> float from_py<float>(py::handle h, FieldRef f);
template <> int from_py<int>(py::handle h, FieldRef f);
template <> int64_t from_py<int64_t>(py::handle h, FieldRef f);
template <> bool from_py<bool>(py::handle h, FieldRef f);
template <> std::string from_py<std::string>(py::handle h, FieldRef f);
template <> std::optional<uint64_t> from_py<std::optional<uint64_t>>(py::handle h, FieldRef f);
// A list/tuple of ints.
template <> std::vector<int> from_py<std::vector<int>>(py::handle h, FieldRef f);
// One str or a list/tuple of str (vLLM's `stop`).
template <> std::vector<std::string> from_py<std::vector<std::string>>(py::handle h, FieldRef f);
// A dict {token id (int): number} (vLLM's logit_bias).
template <> std::map<int, float> from_py<std::map<int, float>>(py::handle h, FieldRef f);

}  // namespace nanovllm::pyb
