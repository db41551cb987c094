// `nanovllm replay FILE [--model DIR] [engine flags] [--url URL] [--trace OUT] [--timing
// steps|wall] [--speed X] [--json]`: re-issues the requests a trace recorded (serve / generate /
// bench with --trace FILE --trace-requests) against an in-process engine (default) or the
// server at --url (and nowhere else), writes a new trace with the same request records, and
// says how the outputs compare with the recording. docs/replay.md has a worked example.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "command.h"
#include "engine/config_json.h"
#include "engine_flags.h"
#include "nanovllm/llm.h"
#include "replay/replay_engine.h"
#include "replay/replay_http.h"
#include "replay/replay_plan.h"
#include "trace/output_diff.h"
#include "trace/request_log.h"
#include "util/check.h"

namespace nanovllm::cli {
namespace {

// The recorded engine's scheduling configuration, for each flag not given: a replay under "the
// same flags" needs none, and a flag given is the one thing that changes.
void apply_recorded_config(const nlohmann::json& rec, CLI::App& app, Config& c) {
  if (!rec.is_object()) return;
  auto take = [&](const char* flag, const char* key, auto& field) {
    auto it = rec.find(key);
    if (app.get_option(flag)->count() == 0 && it != rec.end() && !it->is_null())
      field = it->get<std::remove_reference_t<decltype(field)>>();
  };
  take("--policy", "policy", c.policy);
  take("--max-num-seqs", "max_num_seqs", c.max_num_seqs);
  take("--max-num-batched-tokens", "max_num_batched_tokens", c.max_num_batched_tokens);
  take("--max-model-len", "max_model_len", c.max_model_len);
  take("--block-size", "block_size", c.kvcache_block_size);
  take("--num-kvcache-blocks", "num_kvcache_blocks", c.num_kvcache_blocks);
  if (app.get_option("--no-prefix-caching")->count() == 0 && rec.contains("enable_prefix_caching"))
    c.enable_prefix_caching = rec.value("enable_prefix_caching", true);
}

std::string default_output(const std::string& in) {
  std::filesystem::path p(in);
  return (p.parent_path() / (p.stem().string() + ".replay.json")).string();
}

int run_replay(int argc, char** argv) {
  CLI::App app{"Re-issue the requests of a --trace-requests trace (in-process or to --url) and "
               "compare the outputs",
               "nanovllm replay"};
  Config cfg;
  std::string in, url, api_key, timing_name;
  bool json = false, no_progress = false;
  replay::HttpReplayOptions hopt;
  app.add_option("trace", in, "trace recorded with --trace FILE --trace-requests")->required();
  app.add_option("--model", cfg.model, "model directory (default: the recorded one)");
  app.add_option("--url", url,
                 "send the recorded HTTP requests to this server (http[s]://host:port) instead "
                 "of an in-process engine; nothing is sent anywhere else");
  app.add_option("--api-key", hopt.api_key, "--url: sent as 'Authorization: Bearer KEY'");
  app.add_option("--timing", timing_name,
                 "steps: each request arrives before the engine step it arrived before in the "
                 "recording (same schedule, same step count; in-process only) | wall: at its "
                 "recorded time (default: steps in-process, wall with --url)")
      ->check(CLI::IsMember({"steps", "wall"}));
  app.add_option("--speed", hopt.replay.speed, "--timing wall: arrivals this many times faster")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-concurrency", hopt.max_concurrency, "--url: requests in flight at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--json", json, "print the summary as JSON on stdout");
  app.add_flag("--no-progress", no_progress, "no progress bar on stderr");
  add_engine_flags(app, cfg);
  CLI11_PARSE(app, argc, argv);

  const trace::RequestLog recorded = trace::load_request_log(in, /*need_records=*/true);
  const std::vector<replay::ReplayRequest> plan = replay::plan_replay(recorded);
  const bool remote = !url.empty();
  if (timing_name.empty()) timing_name = remote ? "wall" : "steps";
  NV_CHECK(!remote || timing_name == "wall",
           "--timing steps needs the in-process engine: a server at --url steps on its own");
  hopt.replay.timing = timing_name == "steps" ? replay::Timing::kSteps : replay::Timing::kWall;
  hopt.replay.progress = !no_progress;
  const std::string out = cfg.trace_path.empty() ? default_output(in) : cfg.trace_path;
  NV_CHECK(std::filesystem::absolute(out) != std::filesystem::absolute(in),
           "the replay's trace would overwrite the recording '", in, "': give --trace OUT");

  replay::ReplayStats st;
  int64_t http_errors = 0, transport_errors = 0;
  if (remote) {
    const replay::TargetUrl target = replay::parse_target_url(url);
    Config untouched;  // what the flags would be had none been given (the environment's included)
    untouched.trace_path = cfg.trace_path;
    untouched.worker_command = cfg.worker_command;
    NV_CHECK(config_to_json(untouched) == config_to_json(cfg),
             "--model and the engine flags configure the in-process replay; the server at --url runs "
             "with its own (start it with the flags to compare)");
    hopt.trace_path = out;
    const replay::HttpReplayStats hs = replay::replay_over_http(target, plan, hopt);
    st = hs.replay;
    http_errors = hs.http_errors;
    transport_errors = hs.transport_errors;
    if (!hs.first_error.empty()) std::fprintf(stderr, "replay: first error: %s\n", hs.first_error.c_str());
  } else {
    apply_recorded_config(recorded.config, app, cfg);
    if (cfg.model.empty() && recorded.config.is_object()) cfg.model = recorded.config.value("model", "");
    NV_CHECK(!cfg.model.empty() && std::filesystem::exists(cfg.model), "the recorded model '", cfg.model,
             "' is not here: give --model DIR");
    cfg.trace_path = out;
    cfg.trace_requests = true;  // the replay can itself be replayed and compared
    cfg.validate();
    auto llm = std::make_unique<LLM>(cfg);
    st = replay::replay_in_process(*llm, plan, hopt.replay, replay::plan_markers(recorded));
    llm.reset();  // closes the trace
  }
  const trace::RequestLog replayed = trace::load_request_log(out, /*need_records=*/false);
  const trace::OutputComparison cmp = trace::compare_outputs(recorded, replayed);
  const double tok_s = st.seconds > 0 ? double(st.output_tokens) / st.seconds : 0;
  if (json) {
    nlohmann::json j = {{"mode", remote ? "url" : "in-process"},
                        {"timing", timing_name},
                        {"requests", st.requests},
                        {"trace", out},
                        {"seconds", st.seconds},
                        {"output_tokens", st.output_tokens},
                        {"output_tokens_per_s", tok_s},
                        {"recorded_steps", recorded.steps},
                        {"recording_truncated", recorded.truncated},
                        {"outputs", trace::to_json(cmp)}};
    if (remote) {
      j["http_errors"] = http_errors;
      j["transport_errors"] = transport_errors;
    } else {
      j["steps"] = st.steps;
      j["aborted"] = st.aborted;
    }
    std::cout << j.dump(1) << std::endl;
  } else {
    std::fprintf(stderr, "replay: %lld requests %s (timing %s)", static_cast<long long>(st.requests),
                 remote ? ("to " + url).c_str() : "in-process", timing_name.c_str());
    if (!remote)
      std::fprintf(stderr, ", %lld steps (recorded: %lld)", static_cast<long long>(st.steps),
                   static_cast<long long>(recorded.steps));
    std::fprintf(stderr, ", %lld output tokens in %.2f s (%.1f tok/s)\n",
                 static_cast<long long>(st.output_tokens), st.seconds, tok_s);
    if (remote && (http_errors || transport_errors))
      std::fprintf(stderr, "replay: %lld HTTP errors, %lld without a response\n",
                   static_cast<long long>(http_errors), static_cast<long long>(transport_errors));
    std::fprintf(stderr,
                 "outputs vs the recording: %lld equal, %lld different, %lld not compared\n"
                 "trace: %s (nanovllm trace-view --compare %s %s -o compare.html)\n",
                 static_cast<long long>(cmp.equal), static_cast<long long>(cmp.different),
                 static_cast<long long>(cmp.not_compared + cmp.only_a + cmp.only_b), out.c_str(),
                 in.c_str(), out.c_str());
  }
  return 0;
}

}  // namespace
NANOVLLM_COMMAND("replay", "Re-issue the requests of a --trace-requests trace and compare outputs",
                 run_replay);
}  // namespace nanovllm::cli
