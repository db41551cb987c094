// Startup of `--speculative draft`: the checks a draft model must pass against the target
// (errors name --draft-model) and the draft's ModelRunner, sized to share the target's KV budget.
#pragma once
#include <cstdint>
#include <memory>

#include "engine/draft_proposer.h"
#include "engine/resolved_config.h"
#include "models/model_config.h"

namespace nanovllm {

class Tokenizer;

struct DraftPlan {
  ModelConfig mc;               // the draft's config.json
  int64_t block_bytes = 0;      // its KV bytes per block (all its KV heads: it runs on one rank)
  int64_t weight_bytes = 0;     // its weights on the device, estimated from the parameter count
  int max_len = 0;              // positions its mirrors may hold
};

// Parameters of a decoder with this config (embeddings, attention, MLP or every expert, LM head).
int64_t approx_num_params(const ModelConfig& c);

// Checks target.spec.draft_model: a model directory (or GGUF) whose vocabulary and tokenizer
// equal the target's and which has no more parameters than the target. Throws naming
// --draft-model and what differs.
DraftPlan plan_draft_model(const ResolvedConfig& target, const ModelConfig& target_mc,
                           const Tokenizer* target_tokenizer);

// The draft's ModelRunner (one rank, target's device and weight formats, num_blocks KV blocks:
// as many as the target's) inside its proposer.
std::unique_ptr<DraftModelProposer> make_draft_proposer(const ResolvedConfig& target,
                                                        const DraftPlan& plan, int num_blocks);

}  // namespace nanovllm
