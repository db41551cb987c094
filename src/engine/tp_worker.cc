#include "engine/tp_worker.h"

#include "engine/config_json.h"
#include "engine/model_runner.h"
#include "engine/step_channel.h"

namespace nanovllm {

int run_tp_worker(const DistOptions& options) {
  NV_CHECK(options.rank > 0, "a worker runs rank >= 1 (rank 0 is the engine), got --rank ",
           options.rank);
  auto group = std::make_unique<ProcessGroup>(options);
  // Resolved here: `auto` settles for this machine.
  const ResolvedConfig config = resolve(config_from_json(receive_text(group->control())));
  const ModelConfig mc = ModelConfig::from_dir(config.spec.model);
  ModelRunner runner(config, mc, std::move(group));
  while (runner.serve_step()) {
  }
  return 0;
}

}  // namespace nanovllm
