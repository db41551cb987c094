// BackendOptions (include/nanovllm/backend_options.h): validate() and the one place the runtime
// reads its NANOVLLM_* environment variables, both from the field table.
#include "nanovllm/backend_options.h"

#include <cstdlib>

#include "util/check.h"

namespace nanovllm {

void BackendOptions::validate() const {
  const std::string p = fields_problem(*this, [](const auto& f) { return f.name; });
  if (!p.empty()) NV_THROW("backend ", p);
}

BackendOptions backend_options_from_env() {
  BackendOptions o;
  for_each_field<BackendOptions>([&](const auto& f) {
    if (f.env.empty()) return;
    const std::string name(f.env);
    const char* v = std::getenv(name.c_str());
    if (!v || !*v) return;
    std::string p = parse_text(v, o.*f.member);
    if (p.empty()) p = value_problem(f, o.*f.member);
    if (!p.empty()) NV_THROW(name, " ", p);
  });
  return o;
}

}  // namespace nanovllm
