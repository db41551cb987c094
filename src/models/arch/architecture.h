// An architecture: what a config.json `architectures` name means for the shared decoder. Each one
// lives in its own file of this folder (qwen3.cc, llama.cc, ...) and registers itself with
// NANOVLLM_ARCHITECTURE; the registry (registry.cc) is the list of those files, made by CMake at
// configure time, so adding an architecture touches its own file, its tests and the docs list.
//
// What a file says:
//  - its name(s) (`architectures`[0]) and model_type;
//  - configure(): its own config.json fields (the common ones, sizes, rope, eos ids, are parsed
//    before) into ModelConfig's block options (qk_norm, biases, ...); a field value it cannot run
//    faithfully is an error naming the field;
//  - its checkpoint tensor names (TensorNames: HF names, defaults are the Llama family's);
//  - for make-model: the config fields of a random checkpoint of that architecture.
// The decoder (decoder.cc) and the checkpoint layout (checkpoint_layout.cc) read only ModelConfig's
// block options and the names: no switch on the architecture anywhere else.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nanovllm {

struct ModelConfig;
struct ConfigFields;

// Checkpoint tensor names. Layer tensors are `layer_prefix + l + "." + name + ".weight"` (or ".bias").
struct TensorNames {
  std::string embed = "model.embed_tokens.weight";
  std::string final_norm = "model.norm.weight";
  std::string lm_head = "lm_head.weight";
  std::string layer_prefix = "model.layers.";
  std::string q_proj = "self_attn.q_proj", k_proj = "self_attn.k_proj", v_proj = "self_attn.v_proj";
  std::string o_proj = "self_attn.o_proj";
  std::string q_norm = "self_attn.q_norm", k_norm = "self_attn.k_norm";
  std::string input_norm = "input_layernorm", post_attention_norm = "post_attention_layernorm";
  std::string gate_proj = "mlp.gate_proj", up_proj = "mlp.up_proj", down_proj = "mlp.down_proj";
  // Gemma 3's sandwich norms around the MLP (ModelConfig::sandwich_norm).
  std::string pre_feedforward_norm = "pre_feedforward_layernorm";
  std::string post_feedforward_norm = "post_feedforward_layernorm";
  // MoE layers: the router [E, H] and expert e's "<experts>.<e>.<expert_gate|up|down>" weights.
  std::string router = "mlp.gate", experts = "mlp.experts";
  std::string expert_gate = "gate_proj", expert_up = "up_proj", expert_down = "down_proj";
};

// The make-model options an architecture's random config may look at.
struct RandomConfigOptions {
  bool attention_bias = false;  // --attention-bias
  std::string preset;           // --preset (MoE architectures size their experts by it)
};

struct Architecture {
  std::string name;        // config.json "architectures"[0], e.g. "Qwen3ForCausalLM"
  std::string model_type;  // e.g. "qwen3" (also make-model's --arch)
  int default_max_position_embeddings = 32768;  // transformers' config class default
  // The architecture's own config.json fields -> c's block options. Errors name the field.
  void (*configure)(const ConfigFields& f, ModelConfig& c) = nullptr;
  // make-model: the architecture's own fields of a random checkpoint's config.json.
  void (*random_config)(nlohmann::ordered_json& j, const RandomConfigOptions& o) = nullptr;
  // make-model: the tokenizer family of its random checkpoints ("qwen3" | "llama3"; its vocabulary
  // size, rope theta and norm eps follow it).
  std::string tokenizer = "qwen3";
  TensorNames names;
};

// The architecture of a config.json `architectures` name; an error listing the supported ones.
const Architecture& find_architecture(const std::string& name, const std::string& where);
// By model_type (make-model's --arch); null if none.
const Architecture* find_architecture_by_model_type(const std::string& model_type);
// Every registered architecture, in name order.
std::vector<const Architecture*> architectures();

namespace detail {
struct ArchitectureRegistrar {
  explicit ArchitectureRegistrar(Architecture (*make)());
};
}  // namespace detail

}  // namespace nanovllm

// In an architecture's file: NANOVLLM_ARCHITECTURE(qwen3) { Architecture a; ...; return a; }
// `id` is the file's name (registry.cc calls nanovllm_register_architecture_<id>()).
#define NANOVLLM_ARCHITECTURE(id)                                              \
  static ::nanovllm::Architecture nanovllm_make_architecture_##id();          \
  void nanovllm_register_architecture_##id() {                                 \
    static ::nanovllm::detail::ArchitectureRegistrar r(&nanovllm_make_architecture_##id); \
  }                                                                            \
  static ::nanovllm::Architecture nanovllm_make_architecture_##id()
