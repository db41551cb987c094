// The Python object model the Jinja interpreter needs: str/dict/list methods, global functions,
// attribute/item access, slicing, `in`, iteration, and the template errors; behaviour of
// jinja2 3.1 + Python 3 (and transformers' raise_exception/strftime_now). Filters and tests are
// in jinja_filters.h.
#pragma once
#include <string>

#include "chat/jinja_value.h"
#include "util/check.h"

namespace nanovllm::jinja {

// Error raised by the template's raise_exception(msg): message is exactly msg.
class RaiseError : public Error {
 public:
  using Error::Error;
};
// An error already prefixed with its template line.
class TemplateError : public Error {
 public:
  using Error::Error;
};

// Throws nanovllm::Error(msg) (the interpreter adds the template line).
[[noreturn]] void fail(const std::string& msg);
// Throws the UndefinedError jinja2 raises when an undefined value is used.
[[noreturn]] void fail_undefined(const Value& v);

// obj.name(args) for str/dict/list methods. Returns false when obj has no such method.
bool call_method(const Value& obj, const std::string& name, CallArgs& args, Value& result);
bool has_method(const Value& obj, const std::string& name);
// Global functions: range, namespace, dict, raise_exception, strftime_now. Undefined if unknown.
Value get_global(const std::string& name);

// Python helpers shared by the interpreter.
bool contains(const Value& container, const Value& item);  // `item in container`
// Python iteration: list items, dict keys, string characters; undefined = empty.
List iterate(const Value& v);
Value python_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
Value getattr(const Value& obj, const std::string& name);
Value getitem(const Value& obj, const Value& key);
size_t py_len(const Value& v);

}  // namespace nanovllm::jinja
