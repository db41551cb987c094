// One table per bound struct lists its fields once; from it come the Python properties (typed
// setters), the keyword constructor (positional in table order, unknown keywords rejected like
// a dataclass), __repr__, __eq__ and the field-name list that LLM(**kwargs) filters with.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <string>
#include <vector>

#include "convert.h"

namespace nanovllm::pyb {

template <class T>
struct Field {
  const char* name;
  std::function<void(T&, py::handle)> set;
  std::function<py::object(const T&)> get;
};

template <class T, class M>
Field<T> field(const char* owner, const char* name, M T::*member) {
  return {name,
          [owner, name, member](T& t, py::handle h) { t.*member = from_py<M>(h, {owner, name}); },
          [member](const T& t) { return to_py(t.*member); }};
}

// Sets fields from positional args (table order) and keyword args.
template <class T>
void assign_fields(T& t, const std::vector<Field<T>>& fields, const char* owner,
                   const py::args& args, const py::kwargs& kwargs) {
  if (args.size() > fields.size())
    throw py::type_error(std::string(owner) + "() takes at most " +
                         std::to_string(fields.size()) + " positional arguments (" +
                         std::to_string(args.size()) + " given)");
  std::vector<bool> seen(fields.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    fields[i].set(t, args[i]);
    seen[i] = true;
  }
  for (auto item : kwargs) {
    const std::string key = item.first.cast<std::string>();
    size_t i = 0;
    while (i < fields.size() && key != fields[i].name) ++i;
    if (i == fields.size())
      throw py::type_error(std::string(owner) + "() got an unexpected keyword argument '" + key +
                           "'");
    if (seen[i])
      throw py::type_error(std::string(owner) + "() got multiple values for argument '" + key +
                           "'");
    fields[i].set(t, item.second);
    seen[i] = true;
  }
}

template <class T>
std::string repr_fields(const T& t, const std::vector<Field<T>>& fields, const char* owner) {
  std::string s = std::string(owner) + "(";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) s += ", ";
    s += std::string(fields[i].name) + "=" + py::repr(fields[i].get(t)).template cast<std::string>();
  }
  return s + ")";
}

// Properties, __repr__, __eq__ and a `fields` tuple of names on the class.
template <class T>
void def_fields(py::class_<T>& cls, const std::vector<Field<T>>& fields, const char* owner) {
  py::tuple names(fields.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    const Field<T> f = fields[i];
    names[i] = py::str(f.name);
    cls.def_property(
        f.name, [f](const T& t) { return f.get(t); },
        [f](T& t, py::handle v) { f.set(t, v); });
  }
  cls.attr("fields") = names;
  cls.def("__repr__", [fields, owner](const T& t) { return repr_fields(t, fields, owner); });
  cls.def("__eq__", [fields](const T& a, py::object other) {
    if (!py::isinstance<T>(other)) return false;
    const T& b = other.cast<const T&>();
    for (const auto& f : fields)
      if (!f.get(a).equal(f.get(b))) return false;
    return true;
  });
  cls.def("__copy__", [](const T& t) { return T(t); });
  cls.def("__deepcopy__", [](const T& t, py::dict) { return T(t); });
  cls.attr("__hash__") = py::none();  // mutable, like a dataclass with eq
}

}  // namespace nanovllm::pyb
