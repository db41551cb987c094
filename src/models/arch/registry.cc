// The architecture registry: every file of this folder that defines NANOVLLM_ARCHITECTURE(id).
// arch_list.inc is written by CMake at configure time (one NV_ARCH(id) per models/arch/*.cc but
// this one): calling each file's register function also keeps its object in the link.
#include <map>
#include <mutex>

#include "models/arch/architecture.h"
#include "util/check.h"

namespace nanovllm {

#define NV_ARCH(id) void nanovllm_register_architecture_##id();
#include "models/arch_list.inc"
#undef NV_ARCH

namespace {

std::map<std::string, Architecture>& by_name() {
  static std::map<std::string, Architecture> m;
  return m;
}

void register_all() {
  static std::once_flag once;
  std::call_once(once, [] {
#define NV_ARCH(id) nanovllm_register_architecture_##id();
#include "models/arch_list.inc"
#undef NV_ARCH
  });
}

}  // namespace

detail::ArchitectureRegistrar::ArchitectureRegistrar(Architecture (*make)()) {
  Architecture a = make();
  NV_CHECK(!a.name.empty() && !a.model_type.empty() && a.configure, "an architecture needs a name, a model_type "
           "and configure()");
  NV_CHECK(by_name().emplace(a.name, a).second, "architecture ", a.name, " registered twice");
}

const Architecture& find_architecture(const std::string& name, const std::string& where) {
  register_all();
  auto it = by_name().find(name);
  if (it != by_name().end()) return it->second;
  std::string known;
  for (const auto& [n, a] : by_name()) known += (known.empty() ? "" : ", ") + n;
  NV_THROW("unsupported model: 'architectures' is [\"", name, "\"] in ", where, " (supported: ", known, ")");
}

const Architecture* find_architecture_by_model_type(const std::string& model_type) {
  register_all();
  for (const auto& [n, a] : by_name())
    if (a.model_type == model_type) return &a;
  return nullptr;
}

std::vector<const Architecture*> architectures() {
  register_all();
  std::vector<const Architecture*> v;
  for (const auto& [n, a] : by_name()) v.push_back(&a);
  return v;
}

}  // namespace nanovllm
