// How an embedding model turns its final hidden states into one vector: the
// sentence-transformers files next to config.json (modules.json naming a Pooling module whose
// config.json sets pooling_mode_lasttoken / _mean_tokens / _cls_token, and a Normalize module),
// as Qwen3-Embedding and most HF embedding checkpoints ship them. Without them an embedding
// engine uses last-token pooling + L2 normalization (vLLM's default for decoder models).
#pragma once
#include <optional>
#include <string>

namespace nanovllm {

struct PoolingConfig {
  enum class Mode { kLast, kMean, kCls };
  Mode mode = Mode::kLast;
  bool normalize = true;

  // The sentence-transformers configuration of `model_dir`, or nullopt when it has no
  // modules.json with a Pooling module. Throws nanovllm::Error for malformed files or a pooling
  // mode nanovllm does not implement (named).
  static std::optional<PoolingConfig> from_dir(const std::string& model_dir);
  const char* mode_name() const;
};

}  // namespace nanovllm
