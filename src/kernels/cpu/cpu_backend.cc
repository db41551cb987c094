// The CPU implementation of Backend: F32 activations and KV cache, weights in checkpoint dtype.
#include <cstring>
#include <memory>

#include "kernels/backend_factory.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/pack_int4.h"
#include "kernels/cpu/qgemm.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/weight_arena.h"
#include "kernels/kv_cache_int8.h"
#include "util/check.h"
#include "util/cpu_features.h"

namespace nanovllm {
namespace {

Tensor wrap_i32(const std::vector<int32_t>& v, Shape shape) {
  return Tensor::wrap(const_cast<int32_t*>(v.data()), shape, DType::I32, Device::CPU);
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, const BackendOptions& o)
      : pool_(threads, o.spin_us, o.adaptive_threads),
        arena_(o.cpu_weight_copy),
        linear_path_(o.linear_path) {
    o.validate();
    // The ISA cap is process-wide (util/cpu_features.h): refuse options that ask for another
    // (IsaCap::kNone asks for none in particular).
    NV_CHECK(o.isa == IsaCap::kNone || o.isa == cpu_isa_cap(), "the CPU backend's ISA cap '",
             enum_name(o.isa), "' differs from the process's '", enum_name(cpu_isa_cap()),
             "' (the cap is process-wide: set NANOVLLM_ISA before the first backend)");
  }
  Device device() const override { return Device::CPU; }
  std::string name() const override { return "cpu"; }
  DType act_dtype() const override { return DType::F32; }
  bool kv_cache_dtype_supported(DType d) const override {
    return d == DType::F32 || d == DType::BF16 || d == kKvCacheInt8;
  }
  int num_threads() const override { return pool_.size(); }

  Tensor empty(const Shape& shape, DType dtype) override { return Tensor::empty(shape, dtype); }
  // Not for activations: a fresh mapping per call would pay its page faults every step; the heap
  // reuses its memory. The cost: the first touch of a KV page faults in 2 MiB, not 4 KiB (in the
  // dev VM the host backs guest memory at ~0.4 GB/s on first touch, so a fresh process's first
  // 512-token prefill is ~20% slower; steady-state B = 64 decode is ~19% faster, docs/perf.md).
  Tensor empty_kv_cache(const Shape& shape, DType dtype) override {
    return cpu::huge_page_empty(shape, dtype);
  }
  // Weights move from the mmap'd file into huge-page memory (weight_arena.h says why).
  Tensor to_device(const Tensor& host) override { return arena_.copy(host, pool_); }
  Tensor to_host(const Tensor& t) override { return t; }
  LinearWeight prepare_linear(const Tensor& host, const QuantScheme& scheme) override {
    if (!scheme.enabled()) return LinearWeight{to_device(host), nullptr};
    auto alloc = [this](int64_t rows, int64_t cols) { return arena_.alloc({rows, cols}, DType::U8); };
    return LinearWeight{Tensor(), std::make_shared<QuantizedWeight>(
                                      cpu::quantize_weight(host, scheme, pool_, alloc))};
  }
  LinearWeight prepare_linear_int4(const Int4Groups& w) override {
    auto alloc = [this](int64_t rows, int64_t cols) { return arena_.alloc({rows, cols}, DType::U8); };
    return LinearWeight{Tensor(), std::make_shared<QuantizedWeight>(cpu::pack_int4_groups(w, pool_, alloc))};
  }
  SampleResult sample(const Tensor& logits, const SamplingBatch& batch) override {
    return cpu::sample(logits, batch, pool_);
  }

 protected:
  // The contract checks ran in Backend's fronts (kernels/op_contract.cc).
  BatchTensors upload_batch_impl(const HostBatch& hb) override {
    BatchTensors b;
    b.input_ids = wrap_i32(hb.input_ids, {hb.num_tokens});
    b.positions = wrap_i32(hb.positions, {hb.num_tokens});
    b.slot_mapping = wrap_i32(hb.slot_mapping, {hb.num_tokens});
    b.cu_seqlens_q = wrap_i32(hb.cu_seqlens_q, {hb.num_seqs + 1});
    b.context_lens = wrap_i32(hb.context_lens, {hb.num_seqs});
    b.block_tables = wrap_i32(hb.block_tables, {hb.num_seqs, hb.block_table_stride});
    b.logits_indices = wrap_i32(hb.logits_indices, {int64_t(hb.logits_indices.size())});
    b.num_seqs = hb.num_seqs;
    b.num_tokens = hb.num_tokens;
    b.max_seqlen_q = hb.max_seqlen_q;
    b.max_seqlen_k = hb.max_seqlen_k;
    b.block_size = hb.block_size;
    b.decode_only = hb.decode_only;
    return b;
  }

  void embedding_impl(const Tensor& ids, const Tensor& table, int64_t vocab_start,
                      Tensor& out, float scale) override {
    cpu::embedding(ids, table, vocab_start, out, scale, pool_);
  }
  void rms_norm_impl(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    cpu::rms_norm(x, w, eps, out, pool_);
  }
  void add_rms_norm_impl(Tensor& x, Tensor& residual, const Tensor& w, float eps) override {
    cpu::add_rms_norm(x, residual, w, eps, pool_);
  }
  void linear_impl(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) override {
    cpu::linear(x, w, bias, out, pool_, linear_path_);
  }
  void linear_quantized_impl(const Tensor& x, const QuantizedWeight& w, const Tensor* bias,
                             Tensor& out) override {
    cpu::quantized_linear(x, w, bias, out, pool_);
  }
  void act_and_mul_impl(const Tensor& gate_up, GatedAct act, Tensor& out) override {
    if (act == GatedAct::GeluTanh) cpu::gelu_tanh_and_mul(gate_up, out, pool_);
    else cpu::silu_and_mul(gate_up, out, pool_);
  }
  void qk_norm_rope_impl(Tensor& qkv, const Tensor& positions, const Tensor* q_norm,
                         const Tensor* k_norm, float eps, const Tensor& cos_sin,
                         const AttentionParams& p) override {
    cpu::qk_norm_rope(qkv, positions, q_norm, k_norm, eps, cos_sin, p, pool_);
  }
  void store_kv_impl(const Tensor& qkv, const Tensor& slot_mapping, Tensor& k_cache,
                     Tensor& v_cache, const AttentionParams& p) override {
    cpu::store_kv(qkv, slot_mapping, k_cache, v_cache, p, pool_);
  }
  void attention_impl(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                      const BatchTensors& batch, const AttentionParams& p, Tensor& out) override {
    cpu::paged_attention(qkv, k_cache, v_cache, batch, p, out, pool_);
  }
  void gather_rows_impl(const Tensor& x, const Tensor& idx, Tensor& out) override {
    cpu::gather_rows(x, idx, out);
  }
  void add_inplace_impl(Tensor& a, const Tensor& b) override { cpu::add_inplace(a, b); }
  void moe_route_impl(const Tensor& logits, int top_k, bool normalize, Tensor& ids,
                      Tensor& weights) override {
    cpu::moe_route(logits, top_k, normalize, ids, weights, pool_);
  }
  void moe_experts_impl(const Tensor& x, const MoeExperts& experts, const Tensor& ids,
                        const Tensor& weights, Tensor& out) override {
    cpu::moe_experts(x, experts, ids, weights, out, pool_,
                     [this](const Tensor& in, const LinearWeight& w, Tensor& y, ThreadPool& pool) {
                       if (w.quantized()) cpu::quantized_linear(in, *w.quant, nullptr, y, pool);
                       else cpu::linear(in, w.dense, nullptr, y, pool, linear_path_);
                     });
  }

 private:
  ThreadPool pool_;
  cpu::WeightArena arena_;
  LinearPath linear_path_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int num_threads, const BackendOptions& options) {
  return std::make_unique<CpuBackend>(num_threads, options);
}

}  // namespace nanovllm
