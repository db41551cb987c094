// Runs a Grammar as a pushdown automaton over bytes, determinized lazily.
//
// A stack is a chain of interned nodes (state, parent): the top node's NFA state, and the node
// to continue at when that state's rule ends. A configuration is the set of stacks the input so
// far can be in (as in a GLL / Earley recognizer, nondeterminism is a set), kept after closure
// (epsilons, calls, rule ends expanded) as its "kernel": the nodes whose state has byte edges.
// Configurations are interned, so a configuration id is a state of the lazily built DFA and
// next(config, byte) is a table lookup once computed.
//
// A stack's bottom is kRoot (the grammar's start: reaching it means the whole input is
// complete) or kBase (used by token_masks.cc to run one rule "relative" to an unknown caller:
// reaching it means that rule ended). Not thread-safe: one Pda per user (matcher, mask cache).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/grammar.h"

namespace nanovllm::structured {

class Pda {
 public:
  static constexpr int32_t kRoot = -1;  // parent of the grammar's start frame
  static constexpr int32_t kBase = -2;  // parent of a relative walk's frame
  static constexpr int32_t kDead = -1;  // next(): no stack survives

  struct Node {
    int32_t state, parent;
  };
  struct Config {
    std::vector<int32_t> kernel;  // node ids, sorted
    bool bottom = false;          // a stack reached its bottom here (kRoot: input may end)
  };

  explicit Pda(const Grammar& g);

  // The configuration before any input: the root rule's start, closed.
  int32_t start();
  // The configuration whose only stack is node(state, parent), NOT closed: its next() steps use
  // exactly `state`'s byte edges. `state` must have byte edges.
  int32_t single(int32_t state, int32_t parent);
  // The configuration of the stack `parent_of(node)` continues with, closed (what follows when
  // node's rule ends). node's parent must be a real node (>= 0).
  int32_t after_pop(int32_t node);
  // After consuming `byte`; kDead if no stack survives. Memoized per (config, byte).
  int32_t next(int32_t config, uint8_t byte) {
    size_t i = static_cast<size_t>(config) * 256 + byte;
    if (trans_[i] == kUnknown) fill(config, byte);
    return trans_[i];
  }
  // Runs `bytes` from `config`; kDead as soon as nothing survives.
  int32_t run(int32_t config, std::string_view bytes);

  const Config& config(int32_t id) const { return configs_[id]; }
  bool bottom(int32_t id) const { return bottom_[id]; }  // config(id).bottom, compact for hot loops
  const Node& node(int32_t id) const { return nodes_[id]; }
  size_t num_configs() const { return configs_.size(); }
  size_t num_nodes() const { return nodes_.size(); }
  const Grammar& grammar() const { return g_; }

 private:
  static constexpr int32_t kUnknown = -2;
  int32_t intern_node(int32_t state, int32_t parent);
  int32_t intern_config(std::vector<int32_t>& kernel, bool bottom);
  int32_t step(int32_t config, uint8_t byte);
  // Sets next(config, x) for every byte x that no edge of the kernel tells apart from `byte`
  // (they all lead to the same configuration): one closure per byte class, not per byte.
  void fill(int32_t config, uint8_t byte);
  // Closes `todo_` (seed nodes) and interns the result; kDead when empty and not at bottom.
  int32_t close();

  const Grammar& g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<Config> configs_;
  std::vector<uint8_t> bottom_;  // per config
  std::unordered_map<std::string, int32_t> config_ids_;  // key: kernel ids + bottom, as bytes
  std::vector<int32_t> trans_;                           // configs_.size() * 256
  std::unordered_map<int32_t, int32_t> after_pop_;       // node -> config
  // Scratch for close(): a visit stamp per node (no clearing between calls).
  std::vector<int32_t> todo_;
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 0;
};

}  // namespace nanovllm::structured
