#include "structured/pda.h"

#include <algorithm>

namespace nanovllm::structured {

Pda::Pda(const Grammar& g) : g_(g) {}

int32_t Pda::intern_node(int32_t state, int32_t parent) {
  uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) | static_cast<uint32_t>(parent);
  auto [it, inserted] = node_ids_.emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) {
    nodes_.push_back({state, parent});
    stamp_.push_back(0);
  }
  return it->second;
}

int32_t Pda::intern_config(std::vector<int32_t>& kernel, bool bottom) {
  std::sort(kernel.begin(), kernel.end());
  kernel.erase(std::unique(kernel.begin(), kernel.end()), kernel.end());
  if (kernel.empty() && !bottom) return kDead;
  std::string key(reinterpret_cast<const char*>(kernel.data()), kernel.size() * sizeof(int32_t));
  key.push_back(bottom ? 1 : 0);
  auto [it, inserted] = config_ids_.emplace(std::move(key), static_cast<int32_t>(configs_.size()));
  if (inserted) {
    configs_.push_back({kernel, bottom});
    bottom_.push_back(bottom ? 1 : 0);
    trans_.resize(trans_.size() + 256, kUnknown);
  }
  return it->second;
}

int32_t Pda::start() {
  todo_.assign(1, intern_node(g_.rules[g_.root].start, kRoot));
  return close();
}

int32_t Pda::single(int32_t state, int32_t parent) {
  NV_CHECK(!g_.states[state].bytes.empty(), "Pda::single: state ", state, " has no byte edges");
  std::vector<int32_t> k{intern_node(state, parent)};
  return intern_config(k, false);
}

int32_t Pda::after_pop(int32_t node) {
  auto it = after_pop_.find(node);
  if (it != after_pop_.end()) return it->second;
  int32_t parent = nodes_[node].parent;
  NV_CHECK(parent >= 0, "Pda::after_pop: node ", node, " is a bottom frame");
  todo_.assign(1, parent);
  int32_t c = close();
  after_pop_.emplace(node, c);
  return c;
}

int32_t Pda::run(int32_t config, std::string_view bytes) {
  for (char ch : bytes) {
    if (config == kDead) break;
    config = next(config, static_cast<uint8_t>(ch));
  }
  return config;
}

void Pda::fill(int32_t config, uint8_t byte) {
  int lo = 0, hi = 255;  // the widest byte interval around `byte` crossing no edge boundary
  for (int32_t n : configs_[config].kernel) {
    for (auto& e : g_.states[nodes_[n].state].bytes) {
      if (e.lo <= byte && byte <= e.hi) {
        lo = std::max<int>(lo, e.lo);
        hi = std::min<int>(hi, e.hi);
      } else if (e.hi < byte) {
        lo = std::max<int>(lo, e.hi + 1);
      } else {
        hi = std::min<int>(hi, e.lo - 1);
      }
    }
  }
  int32_t t = step(config, byte);  // may grow trans_: index it afterwards
  for (int x = lo; x <= hi; ++x) trans_[static_cast<size_t>(config) * 256 + x] = t;
}

int32_t Pda::step(int32_t config, uint8_t byte) {
  todo_.clear();
  for (int32_t n : configs_[config].kernel) {
    Node nd = nodes_[n];
    for (auto& e : g_.states[nd.state].bytes)
      if (e.lo <= byte && byte <= e.hi) todo_.push_back(intern_node(e.to, nd.parent));
  }
  return close();
}

int32_t Pda::close() {
  if (++epoch_ == 0) {  // wrapped: old stamps could collide
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
  }
  std::vector<int32_t> kernel;
  bool bottom = false;
  while (!todo_.empty()) {
    int32_t n = todo_.back();
    todo_.pop_back();
    if (stamp_[n] == epoch_) continue;
    stamp_[n] = epoch_;
    Node nd = nodes_[n];  // a copy: interning below may reallocate nodes_
    const Grammar::State& st = g_.states[nd.state];
    if (!st.bytes.empty()) kernel.push_back(n);
    for (int32_t t : st.eps) todo_.push_back(intern_node(t, nd.parent));
    for (auto& c : st.calls) {
      // A call whose return state is the rule's end is a tail call: no frame to come back to.
      int32_t ret = g_.is_end(c.ret) ? nd.parent : intern_node(c.ret, nd.parent);
      todo_.push_back(intern_node(g_.rules[c.rule].start, ret));
    }
    if (g_.is_end(nd.state)) {
      if (nd.parent < 0) bottom = true;
      else todo_.push_back(nd.parent);
    }
  }
  return intern_config(kernel, bottom);
}

}  // namespace nanovllm::structured
