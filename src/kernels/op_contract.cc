#include "kernels/op_contract.h"

#include <cmath>

#include "kernels/batch_contract.h"
#include "kernels/kv_cache_int8.h"

namespace nanovllm {
namespace contract {
namespace {

bool is_float(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }
bool is_act(const Backend& be, DType d) { return d == be.act_dtype() || d == DType::F32; }

// Product of every dimension but the last (1 for a 0-d or 1-d tensor).
int64_t rows_of(const Tensor& t) {
  int64_t r = 1;
  for (int i = 0; i + 1 < t.ndim(); ++i) r *= t.shape()[size_t(i)];
  return r;
}
int64_t last_dim(const Tensor& t) { return t.ndim() == 0 ? 1 : t.size(-1); }

void on_device(const Backend& be, const Tensor& t, const char* op, const char* arg) {
  NV_CHECK(t.device() == be.device(), op, ": ", arg, " ", t.str(), " is on ",
           device_name(t.device()), ", the backend runs on ", device_name(be.device()));
  NV_CHECK(t.raw() != nullptr || t.numel() == 0, op, ": ", arg, " ", t.str(), " has no storage");
}
void act(const Backend& be, const Tensor& t, const char* op, const char* arg) {
  on_device(be, t, op, arg);
  NV_CHECK(is_act(be, t.dtype()), op, ": ", arg, " ", t.str(), " must be an activation (",
           dtype_name(be.act_dtype()), " or F32)");
}
void floating(const Backend& be, const Tensor& t, const char* op, const char* arg) {
  on_device(be, t, op, arg);
  NV_CHECK(is_float(t.dtype()), op, ": ", arg, " ", t.str(), " must be F32, BF16 or F16");
}
void i32(const Backend& be, const Tensor& t, const char* op, const char* arg) {
  on_device(be, t, op, arg);
  NV_CHECK(t.dtype() == DType::I32, op, ": ", arg, " ", t.str(), " must be I32");
}
void same_shape_dtype(const Tensor& a, const Tensor& b, const char* op, const char* what) {
  NV_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype(), op, ": ", what, " ", b.str(),
           " must have the shape and dtype of ", a.str());
}
void eps_ok(float eps, const char* op) {
  NV_CHECK(std::isfinite(eps) && eps >= 0.f, op, ": eps ", eps, " must be finite and >= 0");
}
// The paged KV cache of one layer: [num_slots, Hkv, D], k and v alike, in qkv's dtype or (for
// act_dtype() activations) a cache type the backend takes (CPU: BF16, or int8 (U8 bytes) whose
// rows carry their scale: [num_slots, Hkv, D + 4], kernels/kv_cache_int8.h).
void kv_cache(const Backend& be, const Tensor& qkv, const Tensor& k, const Tensor& v,
              const AttentionParams& p, const char* op) {
  on_device(be, k, op, "k_cache");
  on_device(be, v, op, "v_cache");
  const bool dtype_ok = k.dtype() == qkv.dtype() ||
                        (qkv.dtype() == be.act_dtype() && be.kv_cache_dtype_supported(k.dtype()));
  const int64_t width = kv_cache_row_elems(k.dtype(), p.head_dim);
  NV_CHECK(k.ndim() == 3 && k.size(1) == p.num_kv_heads && k.size(2) == width && dtype_ok,
           op, ": k_cache ", k.str(), " must be [num_slots, ", p.num_kv_heads, ", ", width,
           "] of qkv's dtype ", dtype_name(qkv.dtype()), " (or a KV cache type of the ",
           be.name(), " backend",
           k.dtype() == kKvCacheInt8 ? "; int8 rows are D values and a 4-byte scale" : "", ")");
  same_shape_dtype(k, v, op, "v_cache");
}
void qkv_tensor(const Backend& be, const Tensor& qkv, const AttentionParams& p, const char* op) {
  act(be, qkv, op, "qkv");
  const int64_t width = int64_t(p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim;
  NV_CHECK(qkv.ndim() == 2 && qkv.size(1) == width, op, ": qkv ", qkv.str(), " must be [T, ",
           width, "] = [T, (Hq + 2 Hkv) * D] for Hq=", p.num_q_heads, " Hkv=", p.num_kv_heads,
           " D=", p.head_dim);
}

}  // namespace

void attention_params(const AttentionParams& p, bool rope) {
  NV_CHECK(p.num_q_heads >= 1 && p.num_kv_heads >= 1 && p.num_q_heads % p.num_kv_heads == 0,
           "attention heads: num_q_heads ", p.num_q_heads, " must be a positive multiple of ",
           "num_kv_heads ", p.num_kv_heads);
  NV_CHECK(p.head_dim >= 1 && p.head_dim <= kMaxHeadDim, "head_dim ", p.head_dim,
           " is outside the supported [1, ", kMaxHeadDim, "]");
  NV_CHECK(!rope || p.head_dim % 2 == 0, "RoPE needs an even head_dim, got ", p.head_dim);
  NV_CHECK(std::isfinite(p.scale), "attention scale ", p.scale, " must be finite");
  NV_CHECK(p.sliding_window >= 0, "attention sliding_window ", p.sliding_window,
           " must be >= 0 (0: no window)");
}

void embedding(const Backend& be, const Tensor& ids, const Tensor& table, int64_t vocab_start,
               const Tensor& out, float scale) {
  NV_CHECK(std::isfinite(scale), "embedding: scale ", scale, " must be finite");
  i32(be, ids, "embedding", "ids");
  floating(be, table, "embedding", "table");
  act(be, out, "embedding", "out");
  NV_CHECK(table.ndim() == 2, "embedding: table ", table.str(), " must be [V, H]");
  NV_CHECK(vocab_start >= 0, "embedding: vocab_start ", vocab_start, " must be >= 0");
  const int64_t T = ids.numel(), H = table.size(1);
  NV_CHECK(out.ndim() == 2 && out.size(0) == T && out.size(1) == H, "embedding: out ", out.str(),
           " must be [", T, ", ", H, "] for ids ", ids.str(), " and table ", table.str());
}

namespace {
// x [T, H] act with `other` (out / residual) of its shape and dtype; weight [H] float.
void norm_args(const Backend& be, const Tensor& x, const Tensor& other, const Tensor& w,
               float eps, const char* op, const char* other_name) {
  act(be, x, op, "x");
  on_device(be, other, op, other_name);
  floating(be, w, op, "weight");
  eps_ok(eps, op);
  NV_CHECK(x.ndim() >= 1 && w.ndim() == 1 && w.numel() == x.size(-1) && w.numel() > 0, op,
           ": weight ", w.str(), " must be [H] for x ", x.str());
  same_shape_dtype(x, other, op, other_name);
}
}  // namespace

void rms_norm(const Backend& be, const Tensor& x, const Tensor& w, float eps, const Tensor& out) {
  norm_args(be, x, out, w, eps, "rms_norm", "out");
}

void add_rms_norm(const Backend& be, const Tensor& x, const Tensor& residual, const Tensor& w,
                  float eps) {
  norm_args(be, x, residual, w, eps, "add_rms_norm", "residual");
}

void linear(const Backend& be, const Tensor& x, const Tensor& w, const Tensor* bias,
            const Tensor& out) {
  act(be, x, "linear", "x");
  floating(be, w, "linear", "weight");
  act(be, out, "linear", "out");
  NV_CHECK(w.ndim() == 2 && w.size(1) >= 1, "linear: weight ", w.str(), " must be [N, K], K >= 1");
  const int64_t N = w.size(0), K = w.size(1);
  NV_CHECK(x.ndim() >= 1 && x.size(-1) == K, "linear: x ", x.str(), " must be [T, ", K,
           "] for weight ", w.str());
  NV_CHECK(out.ndim() >= 1 && out.size(-1) == N && rows_of(out) == rows_of(x), "linear: out ",
           out.str(), " must be [", rows_of(x), ", ", N, "]");
  if (bias) {
    floating(be, *bias, "linear", "bias");
    NV_CHECK(bias->ndim() == 1 && bias->numel() == N, "linear: bias ", bias->str(),
             " must be [", N, "]");
  }
}

void linear_quantized(const Backend& be, const Tensor& x, const QuantizedWeight& w,
                      const Tensor* bias, const Tensor& out) {
  act(be, x, "linear", "x");
  act(be, out, "linear", "out");
  auto stored = [&](const QuantizedWeight& q) {
    on_device(be, q.data, "linear", "quantized weight");
    NV_CHECK(q.scheme.enabled() && q.data.dtype() == DType::U8 && q.K >= 1 &&
                 q.data.numel() == q.Np / QuantizedWeight::kBlockRows * q.block_bytes,
             "linear: quantized weight ", q.data.str(), " (", q.scheme.str(), ", [", q.N, ", ", q.K,
             "]) is malformed");
    NV_CHECK(!q.act_index.defined() || (q.act_index.dtype() == DType::I32 && q.act_index.numel() == q.K),
             "linear: quantized weight's act_index ", q.act_index.str(), " must be I32 [", q.K, "]");
  };
  if (w.composite()) {  // column parts in their own layouts, one input (kernels/quantized.h)
    int64_t n = 0;
    for (const auto& p : w.parts) {
      NV_CHECK(p && !p->composite(), "linear: a composite weight's part is missing or composite");
      stored(*p);
      NV_CHECK(p->x_features() == w.x_features(), "linear: a composite weight's ", p->scheme.str(), " part reads ",
               p->x_features(), " features, the weight ", w.x_features());
      n += p->N;
    }
    NV_CHECK(n == w.N, "linear: a composite weight of ", w.N, " rows has parts of ", n);
  } else {
    stored(w);
  }
  NV_CHECK(x.ndim() >= 1 && x.size(-1) == w.x_features(), "linear: x ", x.str(), " must be [T, ",
           w.x_features(), "] for the ", w.scheme.str(), " weight [", w.N, ", ", w.x_features(), "]");
  NV_CHECK(out.ndim() >= 1 && out.size(-1) == w.N && rows_of(out) == rows_of(x), "linear: out ",
           out.str(), " must be [", rows_of(x), ", ", w.N, "]");
  if (bias) {
    floating(be, *bias, "linear", "bias");
    NV_CHECK(bias->ndim() == 1 && bias->numel() == w.N, "linear: bias ", bias->str(),
             " must be [", w.N, "]");
  }
}

void act_and_mul(const Backend& be, const Tensor& gate_up, GatedAct a, const Tensor& out) {
  NV_CHECK(a == GatedAct::Silu || a == GatedAct::GeluTanh, "act_and_mul: unknown activation ", int(a));
  act(be, gate_up, "silu_and_mul", "gate_up");
  on_device(be, out, "silu_and_mul", "out");
  NV_CHECK(gate_up.ndim() >= 1 && last_dim(gate_up) % 2 == 0, "silu_and_mul: gate_up ",
           gate_up.str(), " must be [T, 2I]");
  const int64_t I = last_dim(gate_up) / 2;
  NV_CHECK(out.dtype() == gate_up.dtype() && out.ndim() >= 1 && out.size(-1) == I &&
               rows_of(out) == rows_of(gate_up),
           "silu_and_mul: out ", out.str(), " must be [", rows_of(gate_up), ", ", I, "] of ",
           dtype_name(gate_up.dtype()));
}

void qk_norm_rope(const Backend& be, const Tensor& qkv, const Tensor& positions,
                  const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& cos_sin,
                  const AttentionParams& p) {
  attention_params(p, /*rope=*/true);
  qkv_tensor(be, qkv, p, "qk_norm_rope");
  i32(be, positions, "qk_norm_rope", "positions");
  on_device(be, cos_sin, "qk_norm_rope", "cos_sin");
  eps_ok(eps, "qk_norm_rope");
  NV_CHECK(positions.numel() == qkv.size(0), "qk_norm_rope: positions ", positions.str(),
           " must have one entry per token of qkv ", qkv.str());
  NV_CHECK(cos_sin.dtype() == DType::F32 && cos_sin.ndim() == 2 && cos_sin.size(1) == p.head_dim,
           "qk_norm_rope: cos_sin ", cos_sin.str(), " must be F32 [max_pos, ", p.head_dim, "]");
  for (const Tensor* w : {q_norm, k_norm}) {
    if (!w) continue;
    floating(be, *w, "qk_norm_rope", w == q_norm ? "q_norm" : "k_norm");
    NV_CHECK(w->ndim() == 1 && w->numel() == p.head_dim, "qk_norm_rope: norm weight ", w->str(),
             " must be [", p.head_dim, "]");
  }
  NV_CHECK(!(q_norm && k_norm) || q_norm->dtype() == k_norm->dtype(),
           "qk_norm_rope: q_norm ", q_norm ? q_norm->str() : "", " and k_norm ",
           k_norm ? k_norm->str() : "", " must share a dtype");
}

void store_kv(const Backend& be, const Tensor& qkv, const Tensor& slot_mapping,
              const Tensor& k_cache, const Tensor& v_cache, const AttentionParams& p) {
  attention_params(p, /*rope=*/false);
  qkv_tensor(be, qkv, p, "store_kv");
  i32(be, slot_mapping, "store_kv", "slot_mapping");
  NV_CHECK(slot_mapping.numel() == qkv.size(0), "store_kv: slot_mapping ", slot_mapping.str(),
           " must have one entry per token of qkv ", qkv.str());
  kv_cache(be, qkv, k_cache, v_cache, p, "store_kv");
}

void attention(const Backend& be, const Tensor& qkv, const Tensor& k_cache,
               const Tensor& v_cache, const BatchTensors& batch, const AttentionParams& p,
               const Tensor& out) {
  attention_params(p, /*rope=*/false);
  qkv_tensor(be, qkv, p, "attention");
  kv_cache(be, qkv, k_cache, v_cache, p, "attention");
  on_device(be, out, "attention", "out");
  const int64_t T = qkv.size(0), B = batch.num_seqs;
  NV_CHECK(out.dtype() == qkv.dtype() && out.ndim() == 2 && out.size(0) == T &&
               out.size(1) == int64_t(p.num_q_heads) * p.head_dim,
           "attention: out ", out.str(), " must be [", T, ", ", p.num_q_heads * p.head_dim,
           "] = [T, Hq * D] of ", dtype_name(qkv.dtype()));
  NV_CHECK(batch.num_tokens == T && B >= 0, "attention: batch has num_tokens ", batch.num_tokens,
           " and num_seqs ", B, "; qkv has ", T, " tokens");
  NV_CHECK(batch.max_seqlen_q >= 0 && batch.max_seqlen_k >= 0, "attention: max_seqlen_q ",
           batch.max_seqlen_q, " and max_seqlen_k ", batch.max_seqlen_k, " must be >= 0");
  if (B == 0) return;
  i32(be, batch.cu_seqlens_q, "attention", "batch.cu_seqlens_q");
  i32(be, batch.context_lens, "attention", "batch.context_lens");
  i32(be, batch.block_tables, "attention", "batch.block_tables");
  NV_CHECK(batch.cu_seqlens_q.numel() == B + 1 && batch.context_lens.numel() == B,
           "attention: cu_seqlens_q ", batch.cu_seqlens_q.str(), " and context_lens ",
           batch.context_lens.str(), " must have num_seqs + 1 = ", B + 1, " and ", B, " entries");
  NV_CHECK(batch.block_tables.ndim() == 2 && batch.block_tables.size(0) == B,
           "attention: block_tables ", batch.block_tables.str(), " must be [", B,
           ", max_blocks_per_seq]");
  NV_CHECK(batch.block_size >= 1 && k_cache.size(0) % batch.block_size == 0,
           "attention: block_size ", batch.block_size, " must be >= 1 and divide the cache's ",
           k_cache.size(0), " slots");
}

void gather_rows(const Backend& be, const Tensor& x, const Tensor& idx, const Tensor& out) {
  on_device(be, x, "gather_rows", "x");
  i32(be, idx, "gather_rows", "idx");
  on_device(be, out, "gather_rows", "out");
  NV_CHECK(x.ndim() >= 1, "gather_rows: x ", x.str(), " must have a row dimension");
  Shape want = x.shape();
  want[0] = idx.numel();
  NV_CHECK(out.shape() == want && out.dtype() == x.dtype(), "gather_rows: out ", out.str(),
           " must be ", dtype_name(x.dtype()), shape_str(want), " (one row of x per index)");
}

void add_inplace(const Backend& be, const Tensor& a, const Tensor& b) {
  act(be, a, "add_inplace", "a");
  on_device(be, b, "add_inplace", "b");
  same_shape_dtype(a, b, "add_inplace", "b");
}

void moe_route(const Backend& be, const Tensor& logits, int top_k, const Tensor& ids,
               const Tensor& weights) {
  act(be, logits, "moe_route", "logits");
  i32(be, ids, "moe_route", "ids");
  on_device(be, weights, "moe_route", "weights");
  NV_CHECK(logits.ndim() == 2, "moe_route: logits ", logits.str(), " must be [T, E]");
  const int64_t T = logits.size(0), E = logits.size(1);
  NV_CHECK(top_k >= 1 && top_k <= E, "moe_route: top_k ", top_k, " must be in [1, ", E, "]");
  NV_CHECK(ids.shape() == Shape({T, top_k}), "moe_route: ids ", ids.str(), " must be I32[", T, ", ",
           top_k, "]");
  NV_CHECK(weights.shape() == Shape({T, top_k}) && weights.dtype() == DType::F32, "moe_route: weights ",
           weights.str(), " must be F32[", T, ", ", top_k, "]");
}

void moe_experts(const Backend& be, const Tensor& x, const MoeExperts& ex, const Tensor& ids,
                 const Tensor& weights, const Tensor& out) {
  act(be, x, "moe_experts", "x");
  i32(be, ids, "moe_experts", "ids");
  on_device(be, weights, "moe_experts", "weights");
  on_device(be, out, "moe_experts", "out");
  NV_CHECK(x.ndim() == 2 && x.size(1) == ex.hidden, "moe_experts: x ", x.str(), " must be [T, ",
           ex.hidden, "]");
  const int64_t T = x.size(0);
  NV_CHECK(ex.num_experts() > 0 && ex.down.size() == ex.gate_up.size() && ex.intermediate > 0,
           "moe_experts: ", ex.gate_up.size(), " gate_up and ", ex.down.size(),
           " down weights (intermediate ", ex.intermediate, ") do not make a set of experts");
  for (int64_t e = 0; e < ex.num_experts(); ++e) {
    const LinearWeight& gu = ex.gate_up[size_t(e)];
    const LinearWeight& dn = ex.down[size_t(e)];
    NV_CHECK(gu.out_features() == 2 * ex.intermediate && dn.out_features() == ex.hidden,
             "moe_experts: expert ", e, " has ", gu.out_features(), " gate_up and ",
             dn.out_features(), " down rows, expected ", 2 * ex.intermediate, " and ", ex.hidden);
    if (!gu.quantized()) floating(be, gu.dense, "moe_experts", "gate_up");
    if (!dn.quantized()) floating(be, dn.dense, "moe_experts", "down");
  }
  NV_CHECK(ids.ndim() == 2 && ids.size(0) == T && ids.size(1) >= 1, "moe_experts: ids ", ids.str(),
           " must be I32[", T, ", k]");
  NV_CHECK(weights.shape() == ids.shape() && weights.dtype() == DType::F32, "moe_experts: weights ",
           weights.str(), " must be F32", shape_str(ids.shape()));
  same_shape_dtype(x, out, "moe_experts", "out");
}

}  // namespace contract

// --- Backend's op fronts: the contract, then the implementation ------------------------------

BatchTensors Backend::upload_batch(const HostBatch& hb) {
  check_batch_layout(hb);
  return upload_batch_impl(hb);
}
void Backend::embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start,
                        Tensor& out, float scale) {
  contract::embedding(*this, ids, table, vocab_start, out, scale);
  embedding_impl(ids, table, vocab_start, out, scale);
}
void Backend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  contract::rms_norm(*this, x, w, eps, out);
  rms_norm_impl(x, w, eps, out);
}
void Backend::add_rms_norm(Tensor& x, Tensor& residual, const Tensor& w, float eps) {
  contract::add_rms_norm(*this, x, residual, w, eps);
  add_rms_norm_impl(x, residual, w, eps);
}
void Backend::linear_quantized(const Tensor& x, const QuantizedWeight& w, const Tensor* bias,
                               Tensor& out) {
  contract::linear_quantized(*this, x, w, bias, out);
  linear_quantized_impl(x, w, bias, out);
}
void Backend::linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) {
  contract::linear(*this, x, w, bias, out);
  linear_impl(x, w, bias, out);
}
void Backend::moe_route(const Tensor& logits, int top_k, bool normalize, Tensor& ids,
                        Tensor& weights) {
  contract::moe_route(*this, logits, top_k, ids, weights);
  moe_route_impl(logits, top_k, normalize, ids, weights);
}
void Backend::moe_experts(const Tensor& x, const MoeExperts& experts, const Tensor& ids,
                          const Tensor& weights, Tensor& out) {
  contract::moe_experts(*this, x, experts, ids, weights, out);
  moe_experts_impl(x, experts, ids, weights, out);
}
MoeExperts Backend::prepare_moe_experts(int64_t num_experts, int64_t hidden, int64_t intermediate,
                                        const MoeExpertLoader& load, const QuantScheme& scheme) {
  MoeExperts ex;
  ex.hidden = hidden;
  ex.intermediate = intermediate;
  for (int64_t e = 0; e < num_experts; ++e) {
    auto [gate_up, down] = load(e);
    ex.gate_up.push_back(prepare_linear(gate_up, scheme));
    ex.down.push_back(prepare_linear(down, scheme));
  }
  return ex;
}
void Backend::act_and_mul(const Tensor& gate_up, GatedAct act, Tensor& out) {
  contract::act_and_mul(*this, gate_up, act, out);
  act_and_mul_impl(gate_up, act, out);
}
void Backend::qk_norm_rope(Tensor& qkv, const Tensor& positions, const Tensor* q_norm,
                           const Tensor* k_norm, float eps, const Tensor& cos_sin,
                           const AttentionParams& p) {
  contract::qk_norm_rope(*this, qkv, positions, q_norm, k_norm, eps, cos_sin, p);
  qk_norm_rope_impl(qkv, positions, q_norm, k_norm, eps, cos_sin, p);
}
void Backend::store_kv(const Tensor& qkv, const Tensor& slot_mapping, Tensor& k_cache,
                       Tensor& v_cache, const AttentionParams& p) {
  contract::store_kv(*this, qkv, slot_mapping, k_cache, v_cache, p);
  store_kv_impl(qkv, slot_mapping, k_cache, v_cache, p);
}
void Backend::attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                        const BatchTensors& batch, const AttentionParams& p, Tensor& out) {
  contract::attention(*this, qkv, k_cache, v_cache, batch, p, out);
  attention_impl(qkv, k_cache, v_cache, batch, p, out);
}
void Backend::gather_rows(const Tensor& x, const Tensor& idx, Tensor& out) {
  contract::gather_rows(*this, x, idx, out);
  gather_rows_impl(x, idx, out);
}
void Backend::add_inplace(Tensor& a, const Tensor& b) {
  contract::add_inplace(*this, a, b);
  add_inplace_impl(a, b);
}

}  // namespace nanovllm
