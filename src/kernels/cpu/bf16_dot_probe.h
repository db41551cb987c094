// Whether this CPU multiplies bf16 faster than f32: the fact that decides who runs a BF16
// linear layer with many rows (gemm.cc). oneDNN's bf16 matmul feeds vdpbf16ps (2 MACs per f32
// lane) or AMX tiles; our streaming kernel widens the weights to f32 and uses FMA. vdpbf16ps
// pays off only where the core issues it about as fast as an FMA: on AMD Zen 4 oneDNN ran 1.5-2x
// the streaming kernel from M = 16 (docs/perf.md). The Intel Xeon (Emerald Rapids) VM without
// AMX does 0.49x the f32 MAC rate with it (measured: one vdpbf16ps issued for every four
// FMAs), and there oneDNN bf16 ran at 155 GFLOP/s against the streaming kernel's 207. The
// ratio is measured in ~3 ms; the 1.4 threshold sits far from that VM's 0.49 (0.50 with both
// cores busy) and from the 2.0 of a vdpbf16ps issued like an FMA (not yet run on Zen 4), so a
// machine makes the same choice from run to run (outputs stay reproducible).
#pragma once

namespace nanovllm::cpu {

struct Bf16DotProbe {
  double fma_macs_per_ns = 0;    // one thread, AVX-512 f32 FMA, independent accumulators
  double dpbf16_macs_per_ns = 0; // the same with vdpbf16ps (0: no AVX-512 BF16)
  bool amx_bf16 = false;
  // dpbf16 / fma MAC rate (0 without AVX-512 BF16).
  double speedup() const { return fma_macs_per_ns > 0 ? dpbf16_macs_per_ns / fma_macs_per_ns : 0; }
  // AMX, or vdpbf16ps at >= 1.4x the f32 MAC rate (2.0 where it issues like an FMA): then a
  // bf16 matmul beats widening to f32.
  bool bf16_matmul_wins() const { return amx_bf16 || speedup() >= 1.4; }
};

// Measured once per process, on first use (thread-safe). Under an ISA cap below AVX-512
// (NANOVLLM_ISA) nothing is measured (rates 0): only AMX then sends BF16 to oneDNN (which
// does not follow our cap).
const Bf16DotProbe& bf16_dot_probe();

}  // namespace nanovllm::cpu
