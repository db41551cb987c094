// Rank 0 -> ranks 1..N-1: what to do next, once per step, over the communicator's control path
// (gloo broadcast; the per-layer collectives then run on the data path inside the forward).
//
// Message: one broadcast of kInline bytes = [u32 words][kind, HostBatch scalars, 7 array
// lengths, arrays...] (I32 words); a batch whose words do not fit (large prefills) sends the
// rest in a second broadcast. A decode step of 64 sequences with 4-block tables fits inline.
// Also the one-off exchange of rank 0's Config (JSON) when the group forms.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "kernels/backend.h"

namespace nanovllm {

class GlooGroup;

class StepChannel {
 public:
  static constexpr size_t kInline = 4096;
  explicit StepChannel(Communicator& comm) : comm_(comm) {}
  void send_step(const HostBatch& hb);  // rank 0
  void send_shutdown();                 // rank 0
  // Ranks > 0: blocks until rank 0's next message; false when it is the shutdown.
  bool receive(HostBatch* hb);

 private:
  void send(const std::vector<int32_t>& words);
  Communicator& comm_;
  std::vector<int32_t> buf_;
};

// HostBatch <-> I32 words (exposed for tests).
std::vector<int32_t> encode_step(const HostBatch& hb);
HostBatch decode_step(const int32_t* words, size_t n);

// The group's first message: rank 0's configuration (length, then bytes).
void send_text(GlooGroup& control, const std::string& text);
std::string receive_text(GlooGroup& control);

}  // namespace nanovllm
