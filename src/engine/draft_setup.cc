#include "engine/draft_setup.h"

#include <algorithm>

#include "engine/model_files.h"
#include "kernels/backend_factory.h"
#include "models/decoder.h"
#include "tokenizer/tokenizer.h"
#include "util/check.h"

namespace nanovllm {

int64_t approx_num_params(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q = int64_t(c.num_attention_heads) * c.head_dim,
                kv = int64_t(c.num_key_value_heads) * c.head_dim;
  int64_t n = int64_t(c.vocab_size) * h * (c.tie_word_embeddings ? 1 : 2);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    n += 2 * h * q + 2 * h * kv;  // q, o; k, v
    n += c.is_moe_layer(l) ? int64_t(c.num_experts) * (3 * h * c.moe_intermediate_size + h)
                           : 3 * h * int64_t(c.intermediate_size);
  }
  return n;
}

namespace {

// The first id whose token differs between the two tokenizers, or -1 when they agree.
int first_difference(const Tokenizer& a, const Tokenizer& b) {
  const int n = std::max(a.vocab_size(), b.vocab_size());
  for (int id = 0; id < n; ++id)
    if (a.id_to_token(id) != b.id_to_token(id)) return id;
  return -1;
}

}  // namespace

DraftPlan plan_draft_model(const ResolvedConfig& target, const ModelConfig& target_mc,
                           const Tokenizer* target_tokenizer) {
  const std::string& dir = target.spec.draft_model;
  NV_CHECK(target.spec.task != "embed", "--speculative draft: an embedding model has nothing to draft");
  try {
    check_model_path(dir);
  } catch (const Error& e) {
    NV_THROW("--draft-model: ", e.what());
  }
  DraftPlan p;
  p.mc = ModelConfig::from_dir(dir);
  NV_CHECK(p.mc.vocab_size == target_mc.vocab_size, "--draft-model ", dir, " has a vocabulary of ",
           p.mc.vocab_size, " tokens, the model ", target_mc.vocab_size,
           " (the draft must share the model's tokenizer)");
  const std::unique_ptr<Tokenizer> tok = load_model_tokenizer(dir);
  if (tok && target_tokenizer) {
    const int id = first_difference(*tok, *target_tokenizer);
    NV_CHECK(id < 0, "--draft-model ", dir, " has another tokenizer than the model (token ", id,
             " is '", tok->id_to_token(id), "' there, '", target_tokenizer->id_to_token(id), "' here)");
  }
  const int64_t dn = approx_num_params(p.mc), tn = approx_num_params(target_mc);
  NV_CHECK(dn <= tn, "--draft-model ", dir, " has more parameters (~", dn / 1000000, "M) than the model (~",
           tn / 1000000, "M): a draft must be smaller");
  p.block_bytes = int64_t(KVCache::block_bytes(p.mc, target.spec.kvcache_block_size, target.kv_cache_dtype));
  p.weight_bytes = dn * int64_t(dtype_size(activation_dtype(target.device)));
  // Drafts reach K - 1 positions past the target's longest sequence.
  p.max_len = std::min(target.spec.max_model_len + target.spec.num_speculative_tokens, p.mc.max_context_len());
  return p;
}

std::unique_ptr<DraftModelProposer> make_draft_proposer(const ResolvedConfig& target,
                                                        const DraftPlan& plan, int num_blocks) {
  // The target's options for the draft's own model, resolved afresh: `auto` settles per model
  // (a GGUF or GPTQ draft gets its own quantization), on the target's device and thread count.
  Config s = target.spec;
  s.model = s.draft_model;
  s.draft_model.clear();
  s.speculative = "none";
  s.device = device_name(target.device);
  s.num_threads = target.num_threads;
  s.tensor_parallel_size = 1;  // the draft runs whole on rank 0
  s.dist_init_addr.clear();
  s.trace_path.clear();
  s.trace_requests = false;
  s.num_kvcache_blocks = num_blocks;
  s.max_model_len = plan.max_len;
  const ResolvedConfig d = resolve(s);
  DraftProposerOptions o;
  o.block_size = s.kvcache_block_size;
  o.max_num_batched_tokens = s.max_num_batched_tokens;
  o.max_len = plan.max_len;
  return std::make_unique<DraftModelProposer>(std::make_unique<ModelRunner>(d, plan.mc), o);
}

}  // namespace nanovllm
