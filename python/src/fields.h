// Python classes from the field tables (nanovllm/field.h): one PyField per row gives the
// properties (typed setters), the keyword constructor (positional in table order, unknown
// keywords rejected like a dataclass), __repr__, __eq__ and the `fields` name tuple that
// LLM(**kwargs) filters with. Rows convert by their member's type (convert.h); named enums are
// their names (str), nested tables (Config.backend) their bound class. A field that converts
// differently (a JSON document given as a dict) replaces its row with override_field().
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <string>
#include <vector>

#include "convert.h"
#include "nanovllm/field.h"

namespace nanovllm::pyb {

template <class T>
struct PyField {
  std::string name;
  std::function<void(T&, py::handle)> set;
  std::function<py::object(const T&)> get;
};

// The PyField of one table row.
template <class T, class M>
PyField<T> py_field(const char* owner, const Field<T, M>& f) {
  const std::string name(f.name);
  M T::*member = f.member;
  PyField<T> out{name, nullptr, [member](const T& t) { return to_py(t.*member); }};
  if constexpr (NamedEnum<M>) {
    out.set = [owner, name, member](T& t, py::handle h) {
      const std::string v = from_py<std::string>(h, {owner, name.c_str()});
      if (!enum_from_name(v, t.*member))
        throw py::value_error(std::string(owner) + "." + name + " must be " +
                              choice_list(enum_names(M{})) + ", got '" + v + "'");
    };
    out.get = [member](const T& t) { return py::object(py::str(std::string(enum_name(t.*member)))); };
  } else if constexpr (HasFields<M>) {  // a bound class: an instance of it, copied
    out.set = [owner, name, member](T& t, py::handle h) {
      if (!py::isinstance<M>(h))
        throw py::type_error(std::string(owner) + "." + name + " must be a " +
                             py::type::of<M>().attr("__name__").template cast<std::string>());
      t.*member = h.cast<M>();
    };
    out.get = [member](const T& t) { return py::cast(t.*member); };
  } else {
    out.set = [owner, name, member](T& t, py::handle h) {
      t.*member = from_py<M>(h, {owner, name.c_str()});
    };
  }
  return out;
}

// One PyField per row of T's table, in table order.
template <HasFields T>
std::vector<PyField<T>> table_fields(const char* owner) {
  std::vector<PyField<T>> out;
  for_each_field<T>([&](const auto& f) { out.push_back(py_field(owner, f)); });
  return out;
}

// Replaces the row of the same name (which must exist).
template <class T>
void override_field(std::vector<PyField<T>>& fields, PyField<T> f) {
  for (auto& g : fields)
    if (g.name == f.name) return void(g = std::move(f));
  throw std::logic_error("no field '" + f.name + "' to override");
}

// Sets fields from positional args (table order) and keyword args.
template <class T>
void assign_fields(T& t, const std::vector<PyField<T>>& fields, const char* owner,
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
std::string repr_fields(const T& t, const std::vector<PyField<T>>& fields, const char* owner) {
  std::string s = std::string(owner) + "(";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) s += ", ";
    s += fields[i].name + "=" + py::repr(fields[i].get(t)).template cast<std::string>();
  }
  return s + ")";
}

// Properties, __repr__, __eq__ and a `fields` tuple of names on the class.
template <class T>
void def_fields(py::class_<T>& cls, const std::vector<PyField<T>>& fields, const char* owner) {
  py::tuple names(fields.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    const PyField<T> f = fields[i];
    names[i] = py::str(f.name);
    cls.def_property(
        f.name.c_str(), [f](const T& t) { return f.get(t); },
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
