// Python str semantics on UTF-8 strings for the Jinja interpreter (str methods, case mapping,
// `%` formatting and str.format).
#pragma once
#include <string>

#include "chat/jinja_value.h"

namespace nanovllm::jinja {

// s.name(args) for a Python str method (see kStrMethods in jinja_methods.cc).
Value str_method(const std::string& s, const std::string& name, CallArgs& args);

// str.strip/lstrip/rstrip: chars==nullptr strips whitespace. which: 'b' both, 'l', 'r'.
std::string py_strip(const std::string& s, const Value* chars, char which);
std::string py_upper(const std::string& s);
std::string py_lower(const std::string& s);
std::string py_title(const std::string& s);
std::string py_capitalize(const std::string& s);
std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count);
// fmt % args (args: a value, or a list standing for a tuple).
std::string py_percent_format(const std::string& fmt, const Value& args);

}  // namespace nanovllm::jinja
