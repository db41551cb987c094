// Conformance cases of the row-wise ops: embedding (and its scale), rms_norm, add_rms_norm,
// silu_and_mul / act_and_mul (GELU tanh),
// qk_norm_rope, store_kv, gather_rows, add_inplace, and every op on an empty batch.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "conformance.h"

namespace nanovllm::conformance {
namespace {

// ids inside and outside the shard [vocab_start, vocab_start + 50), and a negative one:
// rows outside the shard are zeros (tensor-parallel sharding and the defensive rule alike).
void embedding_case(Harness& hx, DType tdt, int64_t H, int64_t vocab_start, float scale = 1.f) {
  const int64_t V = 50;
  auto table = hx.random({V, H}, tdt);
  const std::vector<int32_t> ids = {int32_t(vocab_start),     int32_t(vocab_start + V - 1),
                                    int32_t(vocab_start + 3), int32_t(vocab_start + V),
                                    -5,                       int32_t(vocab_start + 10)};
  const int64_t T = int64_t(ids.size());
  Tensor out = hx.poisoned({T, H}, hx.act());
  hx.be.embedding(hx.i32(ids, {T}), table.t, vocab_start, out, scale);
  std::vector<double> want(size_t(T * H), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t r = ids[size_t(t)] - vocab_start;
    if (r >= 0 && r < V)
      for (int64_t i = 0; i < H; ++i)
        want[size_t(t * H + i)] = round_to(hx.act(), double(table.host[size_t(r * H + i)]) * scale);
  }
  // Unscaled: exact copies. Scaled (Gemma): one f32 multiply, then the activation's rounding.
  EXPECT_LE(rel_err(hx.download(out), want), scale == 1.f ? 0.0 : tolerance(hx.act(), Tol::kElementwise));
}

void rms_ref(const float* x, const std::vector<float>& w, int64_t H, double eps, double* out) {
  double ss = 0;
  for (int64_t i = 0; i < H; ++i) ss += double(x[i]) * x[i];
  const double r = 1.0 / std::sqrt(ss / double(H) + eps);
  for (int64_t i = 0; i < H; ++i) out[i] = x[i] * r * w[size_t(i)];
}

void rms_norm_case(Harness& hx, int64_t T, int64_t H, DType wdt) {
  auto x = hx.random({T, H}, hx.act(), -2.f, 2.f);
  auto w = hx.random({H}, wdt, 0.5f, 1.5f);
  Tensor out = hx.poisoned({T, H}, hx.act());
  hx.be.rms_norm(x.t, w.t, 1e-6f, out);
  std::vector<double> want(size_t(T * H));
  for (int64_t t = 0; t < T; ++t) rms_ref(&x.host[size_t(t * H)], w.host, H, 1e-6, &want[size_t(t * H)]);
  EXPECT_LE(rel_err(hx.download(out), want), tolerance(hx.act(), Tol::kElementwise));
}

// residual = act(x + residual) as stored; x = rms_norm of that stored residual.
void add_rms_norm_case(Harness& hx, int64_t T, int64_t H, DType wdt) {
  auto x = hx.random({T, H}, hx.act());
  auto r = hx.random({T, H}, hx.act());
  auto w = hx.random({H}, wdt, 0.5f, 1.5f);
  hx.be.add_rms_norm(x.t, r.t, w.t, 1e-5f);
  std::vector<float> sum(size_t(T * H));
  std::vector<double> want_r(sum.size()), want_x(sum.size());
  for (size_t i = 0; i < sum.size(); ++i)
    want_r[i] = sum[i] = float(round_to(hx.act(), double(x.host[i]) + r.host[i]));
  for (int64_t t = 0; t < T; ++t) rms_ref(&sum[size_t(t * H)], w.host, H, 1e-5, &want_x[size_t(t * H)]);
  const double tol = tolerance(hx.act(), Tol::kElementwise);
  EXPECT_LE(rel_err(hx.download(r.t), want_r), tol) << "residual";
  EXPECT_LE(rel_err(hx.download(x.t), want_x), tol) << "x";
}

void silu_case(Harness& hx, int64_t T, int64_t I) {
  auto gu = hx.random({T, 2 * I}, hx.act(), -4.f, 4.f);
  Tensor out = hx.poisoned({T, I}, hx.act());
  hx.be.silu_and_mul(gu.t, out);
  std::vector<double> want(size_t(T * I));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < I; ++i) {
      const double g = gu.host[size_t(t * 2 * I + i)], u = gu.host[size_t(t * 2 * I + I + i)];
      want[size_t(t * I + i)] = g / (1 + std::exp(-g)) * u;
    }
  EXPECT_LE(rel_err(hx.download(out), want), tolerance(hx.act(), Tol::kElementwise));
}

// gelu_pytorch_tanh(g) * u (Gemma 3's MLP).
void gelu_tanh_case(Harness& hx, int64_t T, int64_t I) {
  auto gu = hx.random({T, 2 * I}, hx.act(), -6.f, 6.f);
  Tensor out = hx.poisoned({T, I}, hx.act());
  hx.be.act_and_mul(gu.t, GatedAct::GeluTanh, out);
  std::vector<double> want(size_t(T * I));
  const double c = std::sqrt(2.0 / M_PI);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < I; ++i) {
      const double g = gu.host[size_t(t * 2 * I + i)], u = gu.host[size_t(t * 2 * I + I + i)];
      want[size_t(t * I + i)] = 0.5 * g * (1 + std::tanh(c * (g + 0.044715 * g * g * g))) * u;
    }
  EXPECT_LE(rel_err(hx.download(out), want), tolerance(hx.act(), Tol::kElementwise));
}

// Hq = 4, Hkv = 2, a 64-row table. `outside`: positions -1 and 64 are outside the table: those
// tokens are normed but not rotated (the contract's defensive rule).
void rope_case(Harness& hx, int D, bool norm, bool outside) {
  const int Hq = 4, Hkv = 2, max_pos = 64, W = (Hq + 2 * Hkv) * D;
  std::vector<int32_t> pos = {0, max_pos - 1, 17, 5, 33, 1};
  if (outside) pos[2] = -1, pos[4] = max_pos;
  const int T = int(pos.size());
  auto qkv = hx.random({T, W}, hx.act(), -2.f, 2.f);
  auto qn = hx.random({D}, DType::BF16, 0.5f, 1.5f);
  auto kn = hx.random({D}, DType::BF16, 0.5f, 1.5f);
  std::vector<float> cs(size_t(max_pos) * D);
  for (int p = 0; p < max_pos; ++p)
    for (int j = 0; j < D / 2; ++j) {
      const double f = p / std::pow(1e6, 2.0 * j / D);
      cs[size_t(p * D + j)] = float(std::cos(f));
      cs[size_t(p * D + D / 2 + j)] = float(std::sin(f));
    }
  auto cos_sin = hx.from(cs, {max_pos, D}, DType::F32);
  hx.be.qk_norm_rope(qkv.t, hx.i32(pos, {T}), norm ? &qn.t : nullptr, norm ? &kn.t : nullptr,
                     1e-6f, cos_sin.t, AttentionParams{Hq, Hkv, D, 1.f});
  std::vector<double> want(qkv.host.begin(), qkv.host.end());  // v columns: unchanged
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < Hq + Hkv; ++h) {
      double* x = &want[size_t(t * W + h * D)];
      if (norm) {
        double ss = 0;
        for (int j = 0; j < D; ++j) ss += x[j] * x[j];
        const double r = 1 / std::sqrt(ss / D + 1e-6);
        const auto& w = h < Hq ? qn.host : kn.host;
        for (int j = 0; j < D; ++j) x[j] = x[j] * r * w[size_t(j)];
      }
      const int p = pos[size_t(t)];
      if (p < 0 || p >= max_pos) continue;
      const float* c = &cs[size_t(p * D)];
      for (int j = 0; j < D / 2; ++j) {
        const double a = x[j], b = x[j + D / 2];
        x[j] = a * c[j] - b * c[D / 2 + j];
        x[j + D / 2] = b * c[j] + a * c[D / 2 + j];
      }
    }
  EXPECT_LE(rel_err(hx.download(qkv.t), want), tolerance(hx.act(), Tol::kElementwise));
}

// Slots -1 are padding (not stored); `outside` adds slots num_slots and -7: not stored either.
void store_kv_case(Harness& hx, int Hkv, int D, bool outside) {
  const int Hq = 2 * Hkv, T = 10, num_slots = 64, W = (Hq + 2 * Hkv) * D, KV = Hkv * D;
  auto qkv = hx.random({T, W}, hx.act());
  std::vector<int32_t> slots(num_slots);
  for (int i = 0; i < num_slots; ++i) slots[size_t(i)] = i;
  std::shuffle(slots.begin(), slots.end(), hx.rng());
  slots.resize(T);
  slots[3] = slots[7] = -1;
  if (outside) slots[1] = num_slots, slots[8] = -7;
  auto kc = hx.random({num_slots, Hkv, D}, hx.act());
  auto vc = hx.random({num_slots, Hkv, D}, hx.act());
  hx.be.store_kv(qkv.t, hx.i32(slots, {T}), kc.t, vc.t, AttentionParams{Hq, Hkv, D, 1.f});
  std::vector<double> wk(kc.host.begin(), kc.host.end()), wv(vc.host.begin(), vc.host.end());
  for (int t = 0; t < T; ++t) {
    const int s = slots[size_t(t)];
    if (s < 0 || s >= num_slots) continue;
    for (int i = 0; i < KV; ++i) {
      wk[size_t(s * KV + i)] = qkv.host[size_t(t * W + Hq * D + i)];
      wv[size_t(s * KV + i)] = qkv.host[size_t(t * W + (Hq + Hkv) * D + i)];
    }
  }
  EXPECT_EQ(rel_err(hx.download(kc.t), wk), 0.0) << "k_cache";
  EXPECT_EQ(rel_err(hx.download(vc.t), wv), 0.0) << "v_cache";
}

// Rows of any dtype; `outside`: indices -1 and T give zero rows (the defensive rule).
void gather_case(Harness& hx, DType dt, bool outside) {
  const int64_t T = 7, H = 33;
  auto x = hx.random({T, H}, dt == DType::I32 ? DType::F32 : dt);
  Tensor xt = x.t;
  if (dt == DType::I32) {  // gather moves bytes: the same rows viewed as I32
    Tensor h = hx.be.to_host(x.t);
    xt = hx.upload(Tensor::wrap(h.raw(), {T, H}, DType::I32, Device::CPU, h.owner()));
  }
  std::vector<int32_t> idx = {6, 0, 2, 2};
  if (outside) idx.push_back(-1), idx.push_back(int32_t(T));
  const int64_t S = int64_t(idx.size());
  Tensor out = hx.poisoned({S, H}, dt);
  hx.be.gather_rows(xt, hx.i32(idx, {S}), out);
  std::vector<float> gf(size_t(S * H));
  if (dt == DType::I32) {
    const Tensor got = hx.be.to_host(out);
    std::memcpy(gf.data(), got.raw(), gf.size() * 4);  // the f32 bits back
  } else {
    gf = hx.download(out);
  }
  std::vector<double> want(size_t(S * H), 0.0);
  for (int64_t i = 0; i < S; ++i) {
    const int32_t r = idx[size_t(i)];
    if (r >= 0 && r < T)
      for (int64_t j = 0; j < H; ++j) want[size_t(i * H + j)] = x.host[size_t(r * H + j)];
  }
  EXPECT_EQ(rel_err(gf, want), 0.0);
}

void add_inplace_case(Harness& hx) {
  auto a = hx.random({5, 40}, hx.act());
  auto b = hx.random({5, 40}, hx.act());
  hx.be.add_inplace(a.t, b.t);
  std::vector<double> want(a.host.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = double(a.host[i]) + b.host[i];
  EXPECT_LE(rel_err(hx.download(a.t), want), tolerance(hx.act(), Tol::kElementwise));
}

// Every op on a batch of zero tokens: accepted, nothing written, no error.
void empty_batch_case(Harness& hx) {
  const int Hq = 2, Hkv = 1, D = 8, H = 16, W = (Hq + 2 * Hkv) * D;
  const DType act = hx.act();
  const AttentionParams ap{Hq, Hkv, D, 0.5f};
  Tensor ids = hx.i32({}, {0}), x = hx.poisoned({0, H}, act), r = hx.poisoned({0, H}, act);
  auto table = hx.random({10, H}, DType::BF16);
  auto w = hx.random({H}, DType::BF16);
  auto lw = hx.random({H, H}, DType::BF16);
  Tensor qkv = hx.poisoned({0, W}, act), attn = hx.poisoned({0, Hq * D}, act);
  auto cos_sin = hx.random({4, D}, DType::F32);
  auto kc = hx.random({16, Hkv, D}, act), vc = hx.random({16, Hkv, D}, act);
  Tensor gu = hx.poisoned({0, 2 * H}, act), mlp = hx.poisoned({0, H}, act);
  hx.be.embedding(ids, table.t, 0, x);
  hx.be.rms_norm(x, w.t, 1e-6f, r);
  hx.be.add_rms_norm(x, r, w.t, 1e-6f);
  hx.be.linear(x, lw.t, nullptr, r);
  hx.be.silu_and_mul(gu, mlp);
  hx.be.qk_norm_rope(qkv, ids, nullptr, nullptr, 1e-6f, cos_sin.t, ap);
  hx.be.store_kv(qkv, ids, kc.t, vc.t, ap);
  HostBatch hb;
  hb.block_size = 16;
  hb.cu_seqlens_q = {0};
  BatchTensors bt = hx.be.upload_batch(hb);
  hx.be.attention(qkv, kc.t, vc.t, bt, ap, attn);
  Tensor g = hx.poisoned({0, H}, act);
  hx.be.gather_rows(x, ids, g);
  hx.be.add_inplace(x, r);
  hx.be.synchronize();
  EXPECT_EQ(rel_err(hx.download(kc.t), std::vector<double>(kc.host.begin(), kc.host.end())), 0.0)
      << "an empty store_kv changed the cache";
}

void add(std::vector<Case>& out, std::string name, std::function<void(Harness&)> fn) {
  out.push_back({std::move(name), false, std::move(fn)});
}

}  // namespace

void add_elementwise_cases(std::vector<Case>& out) {
  for (DType tdt : {DType::F32, DType::BF16, DType::F16})
    for (int64_t H : {64, 7})
      for (int64_t vs : {0, 10})
        add(out, "embedding_table_" + dt_tag(tdt) + "_h" + std::to_string(H) + "_vocab_start" +
                     std::to_string(vs),
            [=](Harness& hx) { embedding_case(hx, tdt, H, vs); });
  // H: vector widths (1024, 64), no multiple of 8 (100), odd (7), one row and several.
  for (int64_t H : {1024, 100, 64, 7})
    for (DType wdt : {DType::BF16, DType::F32})
      add(out, "rms_norm_h" + std::to_string(H) + "_w" + dt_tag(wdt),
          [=](Harness& hx) { rms_norm_case(hx, H == 64 ? 1 : 5, H, wdt); });
  for (int64_t H : {1024, 72, 7})
    for (DType wdt : {DType::BF16, DType::F32})
      add(out, "add_rms_norm_h" + std::to_string(H) + "_w" + dt_tag(wdt),
          [=](Harness& hx) { add_rms_norm_case(hx, 6, H, wdt); });
  for (int64_t I : {160, 13}) add(out, "silu_and_mul_i" + std::to_string(I), [=](Harness& hx) {
    silu_case(hx, 3, I);
  });
  for (int64_t I : {160, 13}) add(out, "gelu_tanh_and_mul_i" + std::to_string(I), [=](Harness& hx) {
    gelu_tanh_case(hx, 3, I);
  });
  // Gemma's sqrt(H) embedding scale (33.9411 for H = 1152), on a bf16 and an f32 table.
  for (DType tdt : {DType::BF16, DType::F32})
    add(out, "embedding_scaled_" + dt_tag(tdt), [=](Harness& hx) { embedding_case(hx, tdt, 64, 10, 33.9411f); });
  for (int D : {8, 32, 64, 96, 128, 256})
    for (bool norm : {true, false})
      add(out, "qk_norm_rope_d" + std::to_string(D) + (norm ? "_qk_norm" : "_no_norm"),
          [=](Harness& hx) { rope_case(hx, D, norm, false); });
  add(out, "qk_norm_rope_position_outside_table_unrotated",
      [](Harness& hx) { rope_case(hx, 64, true, true); });
  for (int D : {8, 64, 128})
    for (int Hkv : {1, 2})
      add(out, "store_kv_d" + std::to_string(D) + "_hkv" + std::to_string(Hkv) + "_slot_minus1",
          [=](Harness& hx) { store_kv_case(hx, Hkv, D, false); });
  add(out, "store_kv_slot_outside_cache_skipped", [](Harness& hx) { store_kv_case(hx, 2, 32, true); });
  add(out, "gather_rows_act", [](Harness& hx) { gather_case(hx, hx.act(), false); });
  add(out, "gather_rows_f32", [](Harness& hx) { gather_case(hx, DType::F32, false); });
  add(out, "gather_rows_i32", [](Harness& hx) { gather_case(hx, DType::I32, false); });
  add(out, "gather_rows_index_outside_zero_row", [](Harness& hx) { gather_case(hx, hx.act(), true); });
  add(out, "add_inplace", [](Harness& hx) { add_inplace_case(hx); });
  add(out, "empty_batch_every_op", [](Harness& hx) { empty_batch_case(hx); });
}

}  // namespace nanovllm::conformance
