#include "convert.h"

#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace nanovllm::pyb {

namespace {

std::string where(FieldRef f) { return std::string(f.owner) + "." + f.name; }

[[noreturn]] void type_error(FieldRef f, const char* expected, py::handle got) {
  throw py::type_error(where(f) + " must be " + expected + ", got " + type_name(got) + " (" +
                       py::repr(got).cast<std::string>() + ")");
}

// Any integer-like object as a 64-bit value; TypeError for other types, ValueError on overflow.
long long as_long_long(py::handle h, FieldRef f, const char* expected) {
  if (!is_integer(h)) type_error(f, expected, h);
  py::object idx = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
  if (!idx) throw py::error_already_set();
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
  if (overflow != 0)
    throw py::value_error(where(f) + " is out of range: " + py::repr(h).cast<std::string>());
  return v;
}

bool is_sequence_not_str(py::handle h) {
  return py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h);
}

}  // namespace

bool is_bool(py::handle h) {
  if (PyBool_Check(h.ptr())) return true;
  return std::strcmp(Py_TYPE(h.ptr())->tp_name, "numpy.bool_") == 0 ||
         std::strcmp(Py_TYPE(h.ptr())->tp_name, "numpy.bool") == 0;
}

bool is_integer(py::handle h) {
  if (is_bool(h)) return false;
  return PyLong_Check(h.ptr()) || PyIndex_Check(h.ptr());
}

std::string type_name(py::handle h) { return Py_TYPE(h.ptr())->tp_name; }

py::str utf8(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

template <>
py::object to_py<float>(const float& v) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf - 1, v);  // shortest round-trip form
  *res.ptr = '\0';
  return py::float_(std::strtod(buf, nullptr));
}

template <>
py::object to_py<std::map<int, float>>(const std::map<int, float>& v) {
  py::dict d;
  for (const auto& [k, x] : v) d[py::int_(k)] = to_py(x);
  return d;
}

template <>
float from_py<float>(py::handle h, FieldRef f) {
  if (is_bool(h) || !(PyFloat_Check(h.ptr()) || is_integer(h))) type_error(f, "a number", h);
  double v = PyFloat_AsDouble(h.ptr());
  if (v == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return float(v);
}

template <>
int64_t from_py<int64_t>(py::handle h, FieldRef f) {
  return int64_t(as_long_long(h, f, "an int"));
}

template <>
int from_py<int>(py::handle h, FieldRef f) {
  long long v = as_long_long(h, f, "an int");
  if (v < INT_MIN || v > INT_MAX)
    throw py::value_error(where(f) + " is out of range for a 32-bit int: " + std::to_string(v));
  return int(v);
}

template <>
bool from_py<bool>(py::handle h, FieldRef f) {
  if (!is_bool(h)) type_error(f, "a bool", h);
  return PyObject_IsTrue(h.ptr()) == 1;
}

template <>
std::string from_py<std::string>(py::handle h, FieldRef f) {
  if (!PyUnicode_Check(h.ptr())) type_error(f, "a str", h);
  return h.cast<std::string>();
}

template <>
std::optional<uint64_t> from_py<std::optional<uint64_t>>(py::handle h, FieldRef f) {
  if (h.is_none()) return std::nullopt;
  if (!is_integer(h)) type_error(f, "None or an int", h);
  py::object idx = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
  if (!idx) throw py::error_already_set();
  unsigned long long v = PyLong_AsUnsignedLongLong(idx.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw py::value_error(where(f) + " must be in [0, 2**64), got " +
                          py::repr(h).cast<std::string>());
  }
  return uint64_t(v);
}

template <>
std::vector<int> from_py<std::vector<int>>(py::handle h, FieldRef f) {
  if (!is_sequence_not_str(h)) type_error(f, "a list of ints", h);
  std::vector<int> out;
  for (py::handle item : h) {
    if (!is_integer(item)) type_error(f, "a list of ints", item);
    out.push_back(from_py<int>(item, f));
  }
  return out;
}

template <>
std::vector<std::string> from_py<std::vector<std::string>>(py::handle h, FieldRef f) {
  if (PyUnicode_Check(h.ptr())) return {h.cast<std::string>()};
  if (h.is_none()) return {};
  if (!is_sequence_not_str(h)) type_error(f, "a str or a list of str", h);
  std::vector<std::string> out;
  for (py::handle item : h) {
    if (!PyUnicode_Check(item.ptr())) type_error(f, "a str or a list of str", item);
    out.push_back(item.cast<std::string>());
  }
  return out;
}

template <>
std::map<int, float> from_py<std::map<int, float>>(py::handle h, FieldRef f) {
  if (h.is_none()) return {};
  if (!PyDict_Check(h.ptr())) type_error(f, "a dict {token id: bias}", h);
  std::map<int, float> out;
  for (auto item : py::reinterpret_borrow<py::dict>(h)) {
    if (!is_integer(item.first)) type_error(f, "a dict with int token ids as keys", item.first);
    out[from_py<int>(item.first, f)] = from_py<float>(item.second, f);
  }
  return out;
}

}  // namespace nanovllm::pyb
