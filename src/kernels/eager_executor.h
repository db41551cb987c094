// The eager step executor and make_step_executor(), which picks the executor a backend runs
// steps with (see kernels/step_executor.h).
#pragma once
#include <memory>
#include <utility>

#include "kernels/backend.h"
#include "kernels/step_executor.h"

namespace nanovllm {

class EagerStepExecutor final : public StepExecutor {
 public:
  EagerStepExecutor(Backend& backend, StepForward forward)
      : be_(backend), forward_(std::move(forward)) {}
  const char* name() const override { return "eager"; }
  Tensor run(const HostBatch& hb) override {
    ++eager_steps_;
    return forward_(be_.upload_batch(hb));
  }

 private:
  Backend& be_;
  StepForward forward_;
};

// The backend's graph executor unless options.enforce_eager or the backend has none (CPU).
inline std::unique_ptr<StepExecutor> make_step_executor(Backend& backend, StepForward forward,
                                                        const StepExecutorOptions& options) {
  if (!options.enforce_eager) {
    if (auto g = backend.make_graph_executor(forward, options)) return g;
  }
  return std::make_unique<EagerStepExecutor>(backend, std::move(forward));
}

}  // namespace nanovllm
