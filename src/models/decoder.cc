#include "models/decoder.h"

#include "models/arch/architecture.h"
#include "models/checkpoint_layout.h"

#include <cmath>

#include "kernels/kv_cache_int8.h"
#include "loader/tensor_ops.h"
#include "models/rotary.h"

namespace nanovllm {

size_t KVCache::block_bytes(const ModelConfig& c, int block_size, DType dtype, int num_kv_heads) {
  if (num_kv_heads < 0) num_kv_heads = c.num_key_value_heads;
  // An int8 cache's rows carry their f32 scale (kernels/kv_cache_int8.h): counted here.
  return 2ull * size_t(c.num_hidden_layers) * size_t(block_size) * size_t(num_kv_heads) *
         size_t(kv_cache_row_elems(dtype, c.head_dim)) * dtype_size(dtype);
}

KVCache KVCache::allocate(Backend& be, const ModelConfig& c, int num_blocks, int block_size,
                          int num_kv_heads, std::optional<DType> dtype) {
  NV_CHECK_GT(num_blocks, 0, "KV cache needs at least one block");
  if (num_kv_heads < 0) num_kv_heads = c.num_key_value_heads;
  const int64_t L = c.num_hidden_layers, slots = int64_t(num_blocks) * block_size;
  const DType dt = dtype.value_or(be.act_dtype());
  const int64_t hkv = num_kv_heads, D = kv_cache_row_elems(dt, c.head_dim);
  KVCache kv;
  kv.num_blocks = num_blocks;
  kv.block_size = block_size;
  NV_CHECK(be.kv_cache_dtype_supported(dt), "the ", be.name(), " backend has no ",
           kv_cache_dtype_name(dt), " KV cache");
  kv.storage = be.empty_kv_cache({2, L, slots, hkv, D}, dt);
  Tensor flat = kv.storage.view({2 * L, slots, hkv, D});
  for (int64_t l = 0; l < L; ++l) {
    kv.k.push_back(flat.rows(l, l + 1).view({slots, hkv, D}));
    kv.v.push_back(flat.rows(L + l, L + l + 1).view({slots, hkv, D}));
  }
  return kv;
}

Tensor DecoderModel::upload(const Tensor& host) {
  weight_bytes_ += host.nbytes();
  return be_.to_device(host);
}

Tensor DecoderModel::load_norm(const WeightStore& ws, const std::string& name, int64_t n) {
  Tensor w = load_replicated(ws, name, {n});
  if (!cfg_.norm_weight_offset) return upload(w);
  // transformers computes (1 + w) in F32 and multiplies in F32; keep it F32 (no rounding).
  std::vector<float> v = to_f32_vector(w);
  Tensor f = Tensor::empty({n}, DType::F32);
  for (int64_t i = 0; i < n; ++i) f.data<float>()[i] = 1.f + v[size_t(i)];
  return upload(f);
}

namespace {
// How much of a weight's precision a scheme keeps: none > int8-g32 > int8 > int4 with zero
// points (exact Q4_K parameters before f16 ones) > symmetric int4, a smaller group before a
// larger one.
int precision_rank(const QuantScheme& q) {
  switch (q.kind) {
    case QuantKind::None: return 1000;
    case QuantKind::Int8: return q.group > 0 ? 550 : 500;
    case QuantKind::Int6: return 520;  // Q6_K's own (lossless) form
    case QuantKind::Int5: return 510;  // Q5_K's
    case QuantKind::Int3: return 60;   // Q3_K's (3-bit codes)
    case QuantKind::Int2: return 50;   // Q2_K's (2-bit codes)
    case QuantKind::Int4: return (q.zero_points ? 200 : 100) + (q.f32_params || q.k_superblocks ? 50 : 0) - q.group;
  }
  return 0;
}
}  // namespace

QuantScheme ModelLoadOptions::scheme_for(const std::vector<std::string>& names) const {
  if (tensor_quant.empty()) return linear_quant;
  std::optional<QuantScheme> best;
  for (const auto& n : names) {
    auto it = tensor_quant.find(n);
    const QuantScheme q = it == tensor_quant.end() ? linear_quant : it->second;
    if (!best || precision_rank(q) > precision_rank(*best)) best = q;
  }
  return best.value_or(linear_quant);
}

LinearWeight DecoderModel::upload_linear(const Tensor& host, const QuantScheme& q) {
  LinearWeight w = be_.prepare_linear(host, q);
  weight_bytes_ += w.nbytes();
  return w;
}

bool mixed_quantized_parts(const WeightStore& ws, const std::vector<std::string>& names, const ModelLoadOptions& opt) {
  if (!opt.checkpoint_int4 || names.size() < 2) return false;
  auto form = [&](const std::string& nm) {  // as stored, or quantized by the tensor's own scheme
    if (ws.has_int4(nm)) return "stored " + std::to_string(ws.int4_bits(nm)) + (ws.int4_table(nm) ? " table" : "");
    const QuantScheme q = opt.scheme_for({nm});
    return q.enabled() ? q.str() + (q.exact_grid ? " exact" : "") : std::string();
  };
  bool mixed = false;
  for (const std::string& nm : names) {
    if (form(nm).empty()) return false;
    mixed = mixed || form(nm) != form(names[0]);
  }
  return mixed;
}

LinearWeight DecoderModel::column_linear(const WeightStore& ws, const std::vector<std::string>& names,
                                         const std::vector<Shape>& shapes, const std::vector<RowRange>& rows,
                                         const ModelLoadOptions& opt) {
  if (opt.checkpoint_int4) {
    if (auto w = load_column_parallel_int4(ws, names, shapes, rows)) {
      LinearWeight lw = be_.prepare_linear_int4(*w);
      weight_bytes_ += lw.nbytes();
      return lw;
    }
    // Parts a GGUF stores in different forms (a Q4_K_M file's Q4_K q / k and Q6_K v): each part
    // as stored (or with its own type's scheme), one composite weight, so that no part is
    // re-quantized to the most precise part's scheme. Only where every part stays quantized and
    // the forms differ (parts of one scheme, e.g. a Q4_0 file's, quantize as one fused weight).
    if (mixed_quantized_parts(ws, names, opt)) {
      std::vector<std::shared_ptr<const QuantizedWeight>> parts;
      for (size_t i = 0; i < names.size(); ++i) {
        const std::vector<RowRange> r = rows.empty() ? std::vector<RowRange>{} : std::vector<RowRange>{rows[i]};
        LinearWeight part;
        if (ws.has_int4(names[i]))
          part = be_.prepare_linear_int4(*load_column_parallel_int4(ws, {names[i]}, {shapes[i]}, r));
        else
          part = be_.prepare_linear(load_column_parallel(ws, {names[i]}, {shapes[i]}, r), opt.scheme_for({names[i]}));
        NV_CHECK(part.quantized(), "tensor '", names[i], "': expected a quantized part");
        parts.push_back(part.quant);
      }
      LinearWeight lw{Tensor(), std::make_shared<QuantizedWeight>(join_quantized_columns(parts))};
      weight_bytes_ += lw.nbytes();
      return lw;
    }
  }
  return upload_linear(load_column_parallel(ws, names, shapes, rows), opt.scheme_for(names));
}

LinearWeight DecoderModel::row_linear(const WeightStore& ws, const std::string& name, const Shape& shape,
                                      const TpInfo& tp, const ModelLoadOptions& opt) {
  if (opt.checkpoint_int4)
    if (auto w = load_row_parallel_int4(ws, name, shape, tp)) {
      LinearWeight lw = be_.prepare_linear_int4(*w);
      weight_bytes_ += lw.nbytes();
      return lw;
    }
  return upload_linear(load_row_parallel(ws, name, shape, tp), opt.scheme_for({name}));
}

DecoderModel::DecoderModel(const ModelConfig& c, Backend& be, const WeightStore& ws,
                           int max_positions, const ModelLoadOptions& opt)
    : DecoderModel(c, be, ws, max_positions, TpShard::plan(c, 0, 1), nullptr, opt) {}

DecoderModel::DecoderModel(const ModelConfig& c, Backend& be, const WeightStore& ws,
                           int max_positions, const TpShard& shard, Communicator* comm,
                           const ModelLoadOptions& opt)
    : cfg_(c), be_(be), shard_(shard), comm_(comm) {
  NV_CHECK(shard.world == (comm ? comm->world_size() : 1) &&
               shard.rank == (comm ? comm->rank() : 0),
           "DecoderModel: shard rank ", shard.rank, " of ", shard.world,
           " does not match the communicator");
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size, V = c.vocab_size;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const TpInfo tp{shard.rank, shard.world};
  // Column-parallel row ranges: the rank's query heads, its (possibly replicated) KV heads,
  // its slice of the intermediate features.
  const RowRange q_rows{shard.q_head_begin * D, shard.num_q_heads * D};
  const RowRange kv_rows{shard.kv_head_begin * D, shard.num_kv_heads * D};
  const RowRange i_rows{shard.rank * shard.intermediate, shard.intermediate};

  const TensorNames& n = c.arch->names;  // the architecture's checkpoint names (models/arch/)
  // Vocab-parallel embedding / LM head: rank r owns rows [vocab_begin, + vocab_rows), padded.
  const Tensor emb = load_vocab_parallel(ws, n.embed, {V, H}, shard.vocab_begin, shard.vocab_rows);
  embed_ = upload(emb);
  const std::string& head = c.tie_word_embeddings ? n.embed : n.lm_head;
  const QuantKind hk = opt.lm_head_quant.kind;
  const int stored_bits = hk == QuantKind::Int6   ? 6
                          : hk == QuantKind::Int5 ? 5
                          : hk == QuantKind::Int3 ? 3
                          : hk == QuantKind::Int2 ? 2
                                                  : 0;
  if (stored_bits && ws.int4_bits(head) == stored_bits) {  // a GGUF's Q6_K / Q5_K / Q3_K / Q2_K head as stored
    lm_head_ = be_.prepare_linear_int4(*load_vocab_parallel_int4(ws, head, {V, H}, shard.vocab_begin, shard.vocab_rows));
    weight_bytes_ += lm_head_.nbytes();
  } else if (stored_bits) {  // not such a head after all (a tied model with a stored lm_head): int8
    lm_head_ = upload_linear(c.tie_word_embeddings ? emb : load_vocab_parallel(ws, head, {V, H}, shard.vocab_begin,
                                                                               shard.vocab_rows),
                             parse_quant_scheme("int8"));
  } else if (c.tie_word_embeddings) {  // tied: HF ignores a stored lm_head when tying
    lm_head_ = opt.lm_head_quant.enabled() ? upload_linear(emb, opt.lm_head_quant)
                                           : LinearWeight{embed_, nullptr};
  } else {
    lm_head_ = upload_linear(load_vocab_parallel(ws, n.lm_head, {V, H}, shard.vocab_begin, shard.vocab_rows),
                             opt.lm_head_quant);
  }
  final_norm_ = load_norm(ws, n.final_norm, H);
  cos_sin_ = be.to_device(make_cos_sin_table(c, max_positions));
  if (c.rope_local_theta > 0) {  // Gemma 3's local layers: plain RoPE with their own base
    ModelConfig local = c;
    local.rope_theta = c.rope_local_theta;
    local.rope_scaling = RopeScaling{};
    local.rope_freq_factors.clear();
    cos_sin_local_ = be.to_device(make_cos_sin_table(local, max_positions));
  }
  if (c.scale_embeddings) {
    // transformers: embed_tokens(ids) * sqrt(H).to(weight dtype): the scale rounds to bf16/f16.
    const float s = float(std::sqrt(double(H)));
    uint16_t bits = 0;
    float r = s;
    if (emb.dtype() == DType::BF16 || emb.dtype() == DType::F16) {
      convert_f32_to(&s, &bits, emb.dtype(), 1);
      convert_to_f32(&bits, emb.dtype(), &r, 1);
    }
    embed_scale_ = r;
  }

  for (int l = 0; l < c.num_hidden_layers; ++l) {
    auto w = [&](const std::string& name) { return layer_tensor(c, l, name); };
    auto b = [&](const std::string& name) { return layer_tensor(c, l, name, "bias"); };
    Layer L;
    L.qkv_w = column_linear(ws, {w(n.q_proj), w(n.k_proj), w(n.v_proj)},
                            {{Hq * D, H}, {Hkv * D, H}, {Hkv * D, H}}, {q_rows, kv_rows, kv_rows}, opt);
    if (c.attention_bias) {  // column-parallel bias: the rank's slice, on every rank
      L.qkv_b = upload(load_column_parallel(ws, {b(n.q_proj), b(n.k_proj), b(n.v_proj)},
                                            {{Hq * D}, {Hkv * D}, {Hkv * D}}, {q_rows, kv_rows, kv_rows}));
    }
    L.o_w = row_linear(ws, w(n.o_proj), {H, Hq * D}, tp, opt);
    // Row-parallel o_proj: every rank holds the whole [H] bias, only rank 0 adds it (the
    // all-reduce sums the ranks' partial outputs, so the bias is added once).
    if (c.o_proj_bias) L.o_b = upload(load_replicated(ws, b(n.o_proj), {H}));
    if (c.qk_norm) {
      L.q_norm = load_norm(ws, w(n.q_norm), D);
      L.k_norm = load_norm(ws, w(n.k_norm), D);
    }
    L.in_norm = load_norm(ws, w(n.input_norm), H);
    L.post_norm = load_norm(ws, w(n.post_attention_norm), H);
    if (c.sandwich_norm) {
      L.pre_ff_norm = load_norm(ws, w(n.pre_feedforward_norm), H);
      L.post_ff_norm = load_norm(ws, w(n.post_feedforward_norm), H);
    }
    L.sliding_window = c.sliding_window(l);
    if (c.is_moe_layer(l)) {
      const int64_t E = c.num_experts, Im = c.moe_intermediate_size;
      const RowRange mi_rows{shard.rank * shard.moe_intermediate, shard.moe_intermediate};
      L.moe = true;
      L.router = upload(load_replicated(ws, w(n.router), {E, H}));
      auto ew = [&](int64_t e, const std::string& name) { return expert_tensor(c, l, e, name); };
      if (opt.checkpoint_int4 && ws.has_int4(ew(0, n.expert_gate))) {
        // GPTQ / AWQ experts, a GGUF's K-quant stacks (gate in Q4_K / Q5_K / Q6_K): each as stored
        // (column_linear / row_linear fall back per projection and count their bytes).
        L.experts.hidden = H;
        L.experts.intermediate = shard.moe_intermediate;
        for (int64_t e = 0; e < E; ++e) {
          L.experts.gate_up.push_back(column_linear(ws, {ew(e, n.expert_gate), ew(e, n.expert_up)},
                                                    {{Im, H}, {Im, H}}, {mi_rows, mi_rows}, opt));
          L.experts.down.push_back(row_linear(ws, ew(e, n.expert_down), {H, Im}, tp, opt));
        }
      } else {
        auto load = [&](int64_t e) {
          return std::pair{load_column_parallel(ws, {ew(e, n.expert_gate), ew(e, n.expert_up)},
                                                {{Im, H}, {Im, H}}, {mi_rows, mi_rows}),
                           load_row_parallel(ws, ew(e, n.expert_down), {H, Im}, tp)};
        };
        // A GGUF stack holds one type for all its experts: expert 0's names give the schemes.
        const QuantScheme gu_q = opt.scheme_for({ew(0, n.expert_gate), ew(0, n.expert_up)});
        const QuantScheme dn_q = opt.scheme_for({ew(0, n.expert_down)});
        if (gu_q.str() == dn_q.str()) {
          L.experts = be.prepare_moe_experts(E, H, shard.moe_intermediate, load, gu_q);
        } else {
          // Mixed (a Q4_K_M file's Q6_K ffn_down_exps): each expert placed like a linear, as the
          // default prepare_moe_experts does, with its own scheme per projection. Only the CPU
          // gets per-tensor schemes (ResolvedConfig::tensor_quantization).
          L.experts.hidden = H;
          L.experts.intermediate = shard.moe_intermediate;
          for (int64_t e = 0; e < E; ++e) {
            auto [gate_up, down] = load(e);
            L.experts.gate_up.push_back(be.prepare_linear(gate_up, gu_q));
            L.experts.down.push_back(be.prepare_linear(down, dn_q));
          }
        }
        weight_bytes_ += L.experts.nbytes();
      }
    } else {
      L.gate_up_w = column_linear(ws, {w(n.gate_proj), w(n.up_proj)}, {{I, H}, {I, H}}, {i_rows, i_rows}, opt);
      L.down_w = row_linear(ws, w(n.down_proj), {H, I}, tp, opt);
    }
    layers_.push_back(std::move(L));
  }
  check_all_tensors_used(c, ws);
}

// Every checkpoint tensor must be consumed above or be one the model deliberately ignores: a
// leftover means config.json and the weights disagree (e.g. an o_proj.bias the model would run
// without), and running anyway would be silently wrong.
void DecoderModel::check_all_tensors_used(const ModelConfig& c, const WeightStore& ws) {
  std::vector<std::string> extra;
  for (const std::string& n : ws.unused()) {
    static const std::string kRotary = "rotary_emb.inv_freq";  // a cache older checkpoints store
    const bool rotary_cache = n.size() >= kRotary.size() &&
                              n.compare(n.size() - kRotary.size(), kRotary.size(), kRotary) == 0;
    // transformers ignores a stored lm_head when the embeddings are tied (and so do we).
    const bool tied_head = c.tie_word_embeddings && n == c.arch->names.lm_head;
    // GGUF's per-frequency RoPE factors went into the config (rope_freq_factors).
    const bool rope_factors = !c.rope_freq_factors.empty() && n == "rope_freqs.weight";
    if (!rotary_cache && !tied_head && !rope_factors) extra.push_back(n);
  }
  if (extra.empty()) return;
  std::string list;
  for (size_t i = 0; i < extra.size() && i < 8; ++i) list += (i ? ", '" : "'") + extra[i] + "'";
  if (extra.size() > 8) list += ", ... (" + std::to_string(extra.size()) + " in all)";
  NV_THROW("the checkpoint in ", ws.dir(), " has ", extra.size(), " tensor(s) the ", c.architecture,
           " model does not use: ", list, ". config.json does not match the weights (e.g. its "
           "attention_bias, tie_word_embeddings or num_hidden_layers)");
}

Tensor DecoderModel::forward_hidden(const BatchTensors& batch, KVCache& cache) {
  const int64_t T = batch.num_tokens, H = cfg_.hidden_size, D = cfg_.head_dim;
  const int64_t I = shard_.intermediate;
  const int hq = shard_.num_q_heads, hkv = shard_.num_kv_heads;
  const bool tp = comm_ && comm_->world_size() > 1;
  const DType act = be_.act_dtype();
  const float eps = float(cfg_.rms_norm_eps);
  const float scale = cfg_.attention_scale > 0 ? float(cfg_.attention_scale)
                                                : float(1.0 / std::sqrt(double(D)));
  AttentionParams ap{hq, hkv, int(D), scale};
  const GatedAct mlp_act = cfg_.hidden_act == "gelu_pytorch_tanh" ? GatedAct::GeluTanh : GatedAct::Silu;
  const bool sandwich = cfg_.sandwich_norm;

  Tensor x = be_.empty({T, H}, act);
  Tensor residual = be_.empty({T, H}, act);
  Tensor y = sandwich ? be_.empty({T, H}, act) : Tensor();  // Gemma: the normed block outputs
  Tensor qkv = be_.empty({T, int64_t(hq + 2 * hkv) * D}, act);
  Tensor attn = be_.empty({T, int64_t(hq) * D}, act);
  Tensor gate_up = be_.empty({T, 2 * I}, act);
  Tensor mlp = be_.empty({T, I}, act);
  Tensor router_logits, topk_ids, topk_w, moe_out;  // MoE layers only
  if (cfg_.num_experts > 0) {
    const int64_t k = cfg_.num_experts_per_tok;
    router_logits = be_.empty({T, int64_t(cfg_.num_experts)}, act);
    topk_ids = be_.empty({T, k}, DType::I32);
    topk_w = be_.empty({T, k}, DType::F32);
    moe_out = be_.empty({T, H}, act);
  }
  // The MLP block of layer L on `in` [T, H] into `out` [T, H] (summed over TP ranks).
  auto mlp_block = [&](Layer& L, const Tensor& in, Tensor& out) {
    if (L.moe) {
      be_.linear(in, L.router, nullptr, router_logits);
      be_.moe_route(router_logits, cfg_.num_experts_per_tok, cfg_.norm_topk_prob, topk_ids, topk_w);
      be_.moe_experts(in, L.experts, topk_ids, topk_w, moe_out);
      std::swap(out, moe_out);  // out is the block's output, as after down_proj
    } else {
      be_.linear(in, L.gate_up_w, nullptr, gate_up);
      be_.act_and_mul(gate_up, mlp_act, mlp);
      be_.linear(mlp, L.down_w, nullptr, out);
    }
    if (tp) comm_->all_reduce_sum(out);  // row-parallel down_proj (MoE: every expert's)
  };

  // Vocab-parallel: each rank embeds the ids in its rows (zeros elsewhere); the sum is the lookup.
  be_.embedding(batch.input_ids, embed_, shard_.vocab_begin, residual, embed_scale_);
  if (tp) comm_->all_reduce_sum(residual);
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& L = layers_[l];
    if (l == 0) {
      be_.rms_norm(residual, L.in_norm, eps, x);  // residual holds the embeddings
    } else {
      be_.add_rms_norm(x, residual, L.in_norm, eps);  // x = the previous layer's block output
    }
    ap.sliding_window = L.sliding_window;
    const Tensor& cos_sin = L.sliding_window > 0 && cos_sin_local_ ? cos_sin_local_ : cos_sin_;
    be_.linear(x, L.qkv_w, L.qkv_b ? &L.qkv_b : nullptr, qkv);
    be_.qk_norm_rope(qkv, batch.positions, L.q_norm ? &L.q_norm : nullptr,
                     L.k_norm ? &L.k_norm : nullptr, eps, cos_sin, ap);
    be_.store_kv(qkv, batch.slot_mapping, cache.k[l], cache.v[l], ap);
    be_.attention(qkv, cache.k[l], cache.v[l], batch, ap, attn);
    be_.linear(attn, L.o_w, L.o_b && shard_.rank == 0 ? &L.o_b : nullptr, x);
    if (tp) comm_->all_reduce_sum(x);  // row-parallel o_proj: sum of the ranks' head groups
    if (sandwich) {
      be_.rms_norm(x, L.post_norm, eps, y);               // y = post_attention_norm(attn out)
      be_.add_rms_norm(y, residual, L.pre_ff_norm, eps);  // residual += y; y = pre_ff_norm(.)
      mlp_block(L, y, x);
      be_.rms_norm(x, L.post_ff_norm, eps, y);            // the MLP output, normed
      std::swap(x, y);
    } else {
      be_.add_rms_norm(x, residual, L.post_norm, eps);
      mlp_block(L, x, x);
    }
  }
  be_.add_rms_norm(x, residual, final_norm_, eps);
  Tensor hidden = be_.empty({batch.logits_indices.numel(), H}, act);
  be_.gather_rows(x, batch.logits_indices, hidden);
  return hidden;
}

Tensor DecoderModel::compute_logits(const Tensor& hidden) {
  NV_CHECK(hidden.ndim() == 2 && hidden.size(1) == cfg_.hidden_size, "compute_logits: hidden ",
           hidden.str(), " must be [S, ", cfg_.hidden_size, "]");
  const int64_t S = hidden.size(0);
  Tensor local = be_.empty({S, shard_.vocab_rows}, DType::F32);
  be_.linear(hidden, lm_head_, nullptr, local);
  if (!comm_ || comm_->world_size() == 1) return local;
  // [S, ceil(V/N)] per rank -> [S, V] on rank 0 (the last rank's padding columns dropped).
  Tensor logits;
  if (comm_->rank() == 0) logits = be_.empty({S, int64_t(cfg_.vocab_size)}, DType::F32);
  comm_->gather_last_dim(local, comm_->rank() == 0 ? &logits : nullptr, 0);
  return logits;
}

Tensor DecoderModel::forward(const BatchTensors& batch, KVCache& cache) {
  return compute_logits(forward_hidden(batch, cache));
}

}  // namespace nanovllm
