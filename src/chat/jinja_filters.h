// Jinja filters and tests (jinja2 3.1 semantics; `tojson` as transformers overrides it).
#pragma once
#include <string>

#include "chat/jinja_value.h"

namespace nanovllm::jinja {

// {{ x | name(args) }}. Throws for unknown filters.
Value apply_filter(const std::string& name, const Value& subject, CallArgs& args);
// {{ x is name(args) }}. Throws for unknown tests.
bool apply_test(const std::string& name, const Value& subject, CallArgs& args);
// Whether a filter/test of that name exists (the parser rejects unknown ones, like jinja2).
bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

}  // namespace nanovllm::jinja
