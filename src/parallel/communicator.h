// The collectives a tensor-parallel model and engine need, behind one interface:
//   single  world size 1: every call is a no-op (or a copy)
//   gloo    CPU backend: host tensors, gloo over TCP (parallel/gloo_group.h)
//   nccl    CUDA backend: device tensors, enqueued on the backend's stream (parallel/nccl_communicator.h)
// Every call is collective: all ranks make it in the same order with the same shapes. Errors
// (a rank that died, a timeout) throw nanovllm::Error naming the operation and the rank.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/tensor.h"

namespace nanovllm {

// Calls and host wall time spent inside collectives on this rank (waiting for the other ranks
// included). Kept by the host communicators (gloo), whose calls return when done; the NCCL
// one only enqueues and keeps none.
struct CommStats {
  int64_t calls = 0;
  int64_t bytes = 0;
  double seconds = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual const char* name() const = 0;  // "single" | "gloo" | "nccl"
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // --- tensors on the backend's device ---------------------------------------------------
  // In place: t = sum over ranks of t. Row-parallel linears (o_proj, down_proj) and the
  // vocab-parallel embedding. Every rank ends with identical values.
  virtual void all_reduce_sum(Tensor& t) = 0;
  // Vocab-parallel LM head: part [S, n] on every rank; on `root`, out [S, N] (N <= world * n)
  // receives rank r's columns [r * n, min(N, (r + 1) * n)) (the padding columns of the last
  // rank are dropped). `out` is ignored on the other ranks.
  virtual void gather_last_dim(const Tensor& part, Tensor* out, int root) = 0;

  // --- host memory (control path: step metadata, agreement on sizes) ---------------------
  virtual void broadcast_bytes(void* data, size_t bytes, int root) = 0;
  virtual int64_t all_reduce_min(int64_t value) = 0;
  virtual void barrier() = 0;

  const CommStats& data_stats() const { return data_stats_; }        // all_reduce_sum, gather_last_dim
  const CommStats& control_stats() const { return control_stats_; }  // broadcast_bytes
  void reset_stats() { data_stats_ = control_stats_ = CommStats{}; }

 protected:
  CommStats data_stats_, control_stats_;
};

// World size 1.
std::unique_ptr<Communicator> make_single_rank_communicator();

// Copies rank r's block of gathered [world, S, n] (host memory) into columns of out [S, N];
// shared by the host communicators (the CUDA one does the same with cudaMemcpy2DAsync).
void scatter_gathered_columns(const char* gathered, int world, int64_t S, int64_t n,
                              size_t elem_size, char* out, int64_t N);

}  // namespace nanovllm
