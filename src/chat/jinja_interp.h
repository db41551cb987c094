// Tree-walking Jinja interpreter. A compiled Template is immutable and may be rendered
// concurrently from several threads (each render has its own scopes).
#pragma once
#include <memory>
#include <string>

#include "chat/jinja_ast.h"

namespace nanovllm::jinja {

class Template {
 public:
  // Parses `source`; throws nanovllm::Error naming the line on syntax errors.
  explicit Template(const std::string& source);
  // `context` must be a dict (the template's variables). Throws nanovllm::Error
  // "chat template error at line N: ..." for runtime errors, or the raise_exception message.
  std::string render(const Value& context) const;

 private:
  Body body_;
};

}  // namespace nanovllm::jinja
