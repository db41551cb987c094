#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/sizing.h"

#include <cstdlib>
#include <cstring>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/kernels.h"

namespace nanovllm {
namespace cuda {
namespace {

// Product of every dimension but the last (the op contract fixed the shapes).
int64_t rows_of(const Tensor& t) {
  int64_t r = 1;
  for (int i = 0; i + 1 < t.ndim(); ++i) r *= t.shape()[size_t(i)];
  return r;
}
int64_t align16(int64_t n) { return (n + 15) / 16 * 16; }

}  // namespace

CudaBackend::CudaBackend(int device_id, const BackendOptions& options) : device_(device_id) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  NV_CHECK(e == cudaSuccess && n > 0, "no CUDA device available (",
           e == cudaSuccess ? "0 devices" : cudaGetErrorString(e), ")");
  NV_CHECK(device_id >= 0 && device_id < n, "CUDA device ", device_id, " does not exist (", n,
           " device(s))");
  CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  NV_CHECK(prop.major >= 8, "GPU ", prop.name, " has compute capability ", prop.major, ".",
           prop.minor, "; the CUDA backend needs >= 8.0 (Ampere or newer, for bf16)");
  num_sms_ = prop.multiProcessorCount;
  name_ = "cuda:" + std::to_string(device_) + " (" + prop.name + ", sm_" +
          std::to_string(prop.major * 10 + prop.minor) + ")";
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming));
  options.validate();
  prefill_impl_ = options.cuda_prefill == CudaPrefill::kTensorCore ? PrefillImpl::kTensorCore
                                                                   : PrefillImpl::kSimple;
  decode_impl_ = options.cuda_decode == CudaDecode::kV2 ? DecodeImpl::kV2 : DecodeImpl::kV1;
  alloc_ = std::make_shared<DeviceAllocator>(device_);
  gemm_ = std::make_unique<Gemm>(stream_, options.cuda_gemm == CudaGemm::kSkinny ? kSkinnyMaxT
                                          : options.cuda_gemm == CudaGemm::kAuto  ? 1
                                                                                  : 0);
}

CudaBackend::~CudaBackend() {
  (void)cudaSetDevice(device_);
  if (stream_) (void)cudaStreamSynchronize(stream_);
  gemm_.reset();
  if (pinned_) (void)cudaFreeHost(pinned_);
  if (staged_) (void)cudaEventDestroy(staged_);
  if (stream_) (void)cudaStreamDestroy(stream_);
  // alloc_ lives on while tensors still reference it (their deleters hold it).
}

void* CudaBackend::pinned(size_t bytes) {
  CUDA_CHECK(cudaEventSynchronize(staged_));  // the previous copy out of the buffer is done
  if (bytes > pinned_bytes_) {
    if (pinned_) CUDA_CHECK(cudaFreeHost(pinned_));
    pinned_ = nullptr;
    size_t cap = pinned_bytes_ ? pinned_bytes_ : size_t(64) << 10;
    while (cap < bytes) cap *= 2;
    CUDA_CHECK(cudaMallocHost(&pinned_, cap));
    pinned_bytes_ = cap;
  }
  return pinned_;
}

Tensor CudaBackend::empty(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) {
    NV_CHECK(d >= 0, "negative dimension in ", shape_str(shape));
    n *= d;
  }
  const size_t bytes = size_t(n) * dtype_size(dtype);
  if (bytes == 0) return Tensor::wrap(nullptr, shape, dtype, Device::CUDA);
  CUDA_CHECK(cudaSetDevice(device_));
  auto mem = alloc_->allocate(bytes);
  return Tensor::wrap(mem.get(), shape, dtype, Device::CUDA, mem);
}

Tensor CudaBackend::to_device(const Tensor& host) {
  if (host.device() == Device::CUDA) return host;
  Tensor t = empty(host.shape(), host.dtype());
  if (host.nbytes() == 0) return t;
  CUDA_CHECK(cudaMemcpyAsync(t.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host tensor may be freed right after
  return t;
}

Tensor CudaBackend::to_host(const Tensor& t) {
  if (t.device() == Device::CPU) return t;
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  if (t.nbytes() == 0) return h;
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaMemcpyAsync(h.raw(), t.raw(), t.nbytes(), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return h;
}

void CudaBackend::synchronize() {
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// All seven arrays go in one pinned buffer and one device block (one copy per step). The
// layout was checked by Backend::upload_batch (check_batch_layout).
BatchTensors CudaBackend::upload_batch_impl(const HostBatch& hb) {
  const int B = hb.num_seqs, T = hb.num_tokens, stride = hb.block_table_stride;
  const std::vector<int32_t>* arrays[] = {&hb.input_ids,     &hb.positions,    &hb.slot_mapping,
                                          &hb.cu_seqlens_q,  &hb.context_lens, &hb.block_tables,
                                          &hb.logits_indices};
  int64_t off[7], total = 0;
  for (int i = 0; i < 7; ++i) {
    off[i] = total;
    total += align16(int64_t(arrays[i]->size()));
  }
  BatchTensors bt;
  bt.num_seqs = B;
  bt.num_tokens = T;
  bt.max_seqlen_q = hb.max_seqlen_q;
  bt.max_seqlen_k = hb.max_seqlen_k;
  bt.block_size = hb.block_size;
  bt.decode_only = hb.decode_only;
  if (total == 0) total = 16;
  Tensor dev = empty({total}, DType::I32);
  auto* host = static_cast<int32_t*>(pinned(size_t(total) * 4));
  for (int i = 0; i < 7; ++i)
    if (!arrays[i]->empty()) std::memcpy(host + off[i], arrays[i]->data(), arrays[i]->size() * 4);
  CUDA_CHECK(cudaMemcpyAsync(dev.raw(), host, size_t(total) * 4, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaEventRecord(staged_, stream_));
  auto part = [&](int i, Shape shape) {
    return Tensor::wrap(dev.data<int32_t>() + off[i], shape, DType::I32, Device::CUDA, dev.owner());
  };
  bt.input_ids = part(0, {T});
  bt.positions = part(1, {T});
  bt.slot_mapping = part(2, {T});
  bt.cu_seqlens_q = part(3, {B + 1});
  bt.context_lens = part(4, {B});
  bt.block_tables = part(5, {B, stride});
  bt.logits_indices = part(6, {int64_t(hb.logits_indices.size())});
  return bt;
}

// The op fronts (kernels/op_contract.cc) checked devices, dtypes and shapes; what is left here
// is dispatch and the limits of one kernel launch.
void CudaBackend::embedding_impl(const Tensor& ids, const Tensor& table, int64_t vocab_start,
                                 Tensor& out, float scale) {
  launch_embedding(ids.data<int32_t>(), ids.numel(), table.raw(), table.dtype(), table.size(0),
                   table.size(1), vocab_start, scale, out.raw(), out.dtype(), stream_);
}

void CudaBackend::rms_norm_impl(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  launch_rms_norm(x.raw(), w.raw(), w.dtype(), out.raw(), x.dtype(), rows_of(x), w.numel(), eps,
                  stream_);
}

void CudaBackend::add_rms_norm_impl(Tensor& x, Tensor& residual, const Tensor& w, float eps) {
  launch_add_rms_norm(x.raw(), residual.raw(), w.raw(), w.dtype(), x.dtype(), rows_of(x),
                      w.numel(), eps, stream_);
}

// Fast path: bf16 x and w -> bf16 / f32 out in one cuBLASLt call. Otherwise x is converted to
// w's dtype, and the product goes through an f32 scratch when cuBLASLt cannot write `out`'s
// dtype directly.
void CudaBackend::linear_impl(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) {
  const int64_t N = w.size(0), K = w.size(1), T = rows_of(x);
  if (T == 0) return;
  const DType in = w.dtype();
  Tensor xin = x;
  if (x.dtype() != in) {
    xin = empty({T, K}, in);
    launch_convert(x.raw(), x.dtype(), xin.raw(), in, T * K, stream_);
  }
  const void* bptr = bias ? bias->raw() : nullptr;
  const DType bdt = bias ? bias->dtype() : out.dtype();
  if (Gemm::supported(in, out.dtype())) {
    gemm_->run(xin.raw(), w.raw(), in, bptr, bdt, out.raw(), out.dtype(), T, N, K);
  } else {
    Tensor tmp = empty({T, N}, DType::F32);
    gemm_->run(xin.raw(), w.raw(), in, bptr, bdt, tmp.raw(), DType::F32, T, N, K);
    launch_convert(tmp.raw(), DType::F32, out.raw(), out.dtype(), T * N, stream_);
  }
}

void CudaBackend::act_and_mul_impl(const Tensor& gate_up, GatedAct act, Tensor& out) {
  if (act == GatedAct::GeluTanh)
    launch_gelu_tanh_and_mul(gate_up.raw(), out.raw(), out.dtype(), rows_of(gate_up),
                             out.size(-1), stream_);
  else
    launch_silu_and_mul(gate_up.raw(), out.raw(), out.dtype(), rows_of(gate_up), out.size(-1),
                        stream_);
}

void CudaBackend::qk_norm_rope_impl(Tensor& qkv, const Tensor& positions, const Tensor* q_norm,
                                    const Tensor* k_norm, float eps, const Tensor& cos_sin,
                                    const AttentionParams& p) {
  const DType ndt = q_norm ? q_norm->dtype() : k_norm ? k_norm->dtype() : DType::BF16;
  launch_qk_norm_rope(qkv.raw(), qkv.dtype(), positions.data<int32_t>(),
                      q_norm ? q_norm->raw() : nullptr, k_norm ? k_norm->raw() : nullptr, ndt, eps,
                      cos_sin.data<float>(), cos_sin.size(0), qkv.size(0), p.num_q_heads,
                      p.num_kv_heads, p.head_dim, stream_);
}

void CudaBackend::store_kv_impl(const Tensor& qkv, const Tensor& slot_mapping, Tensor& k_cache,
                                Tensor& v_cache, const AttentionParams& p) {
  launch_store_kv(qkv.raw(), qkv.dtype(), slot_mapping.data<int32_t>(), qkv.size(0),
                  k_cache.raw(), v_cache.raw(), p.num_q_heads, p.num_kv_heads, p.head_dim,
                  k_cache.size(0), stream_);
}

void CudaBackend::attention_impl(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                                 const BatchTensors& batch, const AttentionParams& p, Tensor& out) {
  if (batch.num_seqs == 0 || batch.num_tokens == 0) return;
  AttentionArgs a;
  a.qkv = qkv.raw();
  a.k_cache = k_cache.raw();
  a.v_cache = v_cache.raw();
  a.out = out.raw();
  a.cu_seqlens_q = batch.cu_seqlens_q.data<int32_t>();
  a.context_lens = batch.context_lens.data<int32_t>();
  a.block_tables = batch.block_tables.data<int32_t>();
  a.num_seqs = batch.num_seqs;
  a.num_tokens = batch.num_tokens;
  a.max_seqlen_q = batch.max_seqlen_q;
  a.max_seqlen_k = batch.max_seqlen_k;
  a.block_size = batch.block_size;
  a.table_stride = int(batch.block_tables.size(1));
  a.Hq = p.num_q_heads;
  a.Hkv = p.num_kv_heads;
  a.D = p.head_dim;
  a.num_slots = k_cache.size(0);
  a.scale = p.scale;
  a.window = p.sliding_window;
  a.act = qkv.dtype();
  // Padding rows (graph_policy.h) belong to no sequence, so no kernel writes them: zero them.
  if (batch.padded_tail) CUDA_CHECK(cudaMemsetAsync(out.raw(), 0, out.nbytes(), stream_));
  if (batch.decode_only && batch.max_seqlen_q == 1) {
    // Each kernel sizes its own partials (v2's split count comes from its occupancy).
    const bool v2 = decode_impl_ == DecodeImpl::kV2;
    const int64_t nf =
        v2 ? decode_v2_partials_floats(a, num_sms_) : decode_partials_floats(a, num_sms_);
    Tensor partials = nf > 0 ? empty({nf}, DType::F32) : Tensor();
    float* pp = nf > 0 ? partials.data<float>() : nullptr;
    if (v2) launch_attention_decode_v2(a, pp, num_sms_, stream_);
    else launch_attention_decode(a, pp, num_sms_, stream_);
  } else if (prefill_impl_ == PrefillImpl::kTensorCore && attention_prefill_tc_supported(a)) {
    launch_attention_prefill_tc(a, stream_);
  } else {
    launch_attention_prefill(a, stream_);
  }
}

void CudaBackend::gather_rows_impl(const Tensor& x, const Tensor& idx, Tensor& out) {
  const int64_t rows = x.size(0);
  const int64_t row_bytes = rows ? int64_t(x.nbytes()) / rows : 0;
  launch_gather_rows(x.raw(), idx.data<int32_t>(), idx.numel(), row_bytes, rows, out.raw(),
                     stream_);
}

void CudaBackend::add_inplace_impl(Tensor& a, const Tensor& b) {
  launch_add_inplace(a.raw(), b.raw(), a.dtype(), a.numel(), stream_);
}

MoeExperts CudaBackend::prepare_moe_experts(int64_t num_experts, int64_t hidden,
                                            int64_t intermediate, const MoeExpertLoader& load,
                                            const QuantScheme& scheme) {
  NV_CHECK(!scheme.enabled(), "--quantization ", scheme.str(), " is not supported on the ", name(),
           " backend (only on the CPU)");
  MoeExperts ex;
  ex.hidden = hidden;
  ex.intermediate = intermediate;
  const int64_t E = num_experts, H = hidden, I = intermediate;
  CUDA_CHECK(cudaSetDevice(device_));
  for (int64_t e = 0; e < E; ++e) {
    auto [gu, dn] = load(e);
    NV_CHECK(gu.shape() == Shape({2 * I, H}) && dn.shape() == Shape({H, I}) && gu.dtype() == dn.dtype(),
             "expert ", e, ": gate_up ", gu.str(), " and down ", dn.str(), " must be [", 2 * I, ", ", H,
             "] and [", H, ", ", I, "] of one dtype");
    if (e == 0) {
      ex.gate_up_all = empty({E * 2 * I, H}, gu.dtype());
      ex.down_all = empty({E * H, I}, dn.dtype());
    }
    NV_CHECK(gu.dtype() == ex.gate_up_all.dtype(), "expert ", e, " is ", dtype_name(gu.dtype()),
             ", expert 0 ", dtype_name(ex.gate_up_all.dtype()), ": the experts must share a dtype");
    Tensor gu_dst = ex.gate_up_all.rows(e * 2 * I, (e + 1) * 2 * I);
    Tensor dn_dst = ex.down_all.rows(e * H, (e + 1) * H);
    CUDA_CHECK(cudaMemcpyAsync(gu_dst.raw(), gu.raw(), gu.nbytes(), cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaMemcpyAsync(dn_dst.raw(), dn.raw(), dn.nbytes(), cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host tensors go away with this iteration
    ex.gate_up.push_back(LinearWeight{gu_dst, nullptr});
    ex.down.push_back(LinearWeight{dn_dst, nullptr});
  }
  return ex;
}

void CudaBackend::moe_route_impl(const Tensor& logits, int top_k, bool normalize, Tensor& ids,
                                 Tensor& weights) {
  launch_moe_route(logits.raw(), logits.dtype(), logits.size(0), int(logits.size(1)), top_k,
                   normalize, ids.data<int32_t>(), weights.data<float>(), stream_);
}

void CudaBackend::moe_experts_impl(const Tensor& x, const MoeExperts& ex, const Tensor& ids,
                                   const Tensor& weights, Tensor& out) {
  NV_CHECK(ex.gate_up_all.defined() && ex.down_all.defined(),
           "moe_experts: the CUDA backend takes experts made by its prepare_moe_experts");
  const int64_t T = x.size(0), k = ids.size(1), P = T * k;
  MoeLaunch m;
  m.x = x.raw();
  m.gate_up = ex.gate_up_all.raw();
  m.down = ex.down_all.raw();
  m.ids = ids.data<int32_t>();
  m.weights = weights.data<float>();
  Tensor gu = empty({P, 2 * ex.intermediate}, x.dtype());
  Tensor h = empty({P, ex.intermediate}, x.dtype());
  Tensor y = empty({P, ex.hidden}, DType::F32);
  m.gu = gu.raw();
  m.h = h.raw();
  m.y = y.data<float>();
  m.out = out.raw();
  m.T = T;
  m.H = ex.hidden;
  m.I = ex.intermediate;
  m.k = int(k);
  m.E = int(ex.num_experts());
  m.act = x.dtype();
  m.w_dt = ex.gate_up_all.dtype();
  launch_moe_experts(m, stream_);
}

CudaBackend::MemoryInfo CudaBackend::memory_info() {
  CUDA_CHECK(cudaSetDevice(device_));
  size_t fr = 0, tot = 0;
  CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
  MemoryInfo m;
  m.total = int64_t(tot);
  m.free = int64_t(fr);
  m.peak = int64_t(alloc_->peak_bytes());
  m.current = int64_t(alloc_->current_bytes());
  return m;
}

int64_t CudaBackend::kv_cache_budget_bytes(double utilization) {
  synchronize();
  MemoryInfo m = memory_info();
  // compute_num_kv_blocks with 1-byte blocks = the byte budget (its checks give clear errors).
  return compute_num_kv_blocks(m.total, m.free, m.peak, m.current, utilization, 1);
}

}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend(int device_id, const BackendOptions& options) {
  return std::make_unique<cuda::CudaBackend>(device_id, options);
}

bool cuda_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  for (int i = 0; i < n; ++i) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i) == cudaSuccess &&
        major >= 8)
      return true;
  }
  return false;
}

}  // namespace nanovllm
