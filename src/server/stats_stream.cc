// GET /v1/stats/stream: the web page's dashboard feed. Server-sent events, one JSON object per
// interval (default 1 s): the counters and gauges of /metrics, throughput since the previous
// event, TTFT / ITL percentiles over the last minutes, and the engine configuration. It holds
// no request content (no prompt, output, or id), only numbers and the configuration.
//
// Cost to the engine: each event reads the snapshot the engine thread already publishes after
// every step and the metrics' counters (short locks), never the LLM itself.
#include <chrono>
#include <ctime>
#include <thread>

#include "server/guarded_server.h"
#include "server/handlers.h"
#include "server/openai_response.h"

namespace nanovllm::server {

using nlohmann::json;
using namespace std::chrono_literals;

FrontendSnapshot frontend_snapshot(const GuardedServer& svr, const ServerContext& ctx) {
  FrontendSnapshot f;
  f.connections = svr.registry().size();
  f.connections_evicted = svr.registry().evicted();
  f.connections_refused = svr.registry().refused();
  f.engine_dead = ctx.loop->dead();
  return f;
}

namespace {

json percentiles(const RecentSamples::Summary& s) {
  if (s.n == 0) return json{{"n", 0}, {"p50", nullptr}, {"p90", nullptr}, {"p99", nullptr}};
  return json{{"n", s.n}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}};
}

// Per stream: the previous event's totals, for rates.
struct StatsStream {
  ServerContext* ctx = nullptr;
  const GuardedServer* svr = nullptr;
  std::chrono::milliseconds interval{1000};
  Clock::time_point next{};
  bool first = true;
  Clock::time_point prev_time{};
  int64_t prev_prefill = 0, prev_decode = 0, prev_steps = 0;
  double prev_busy = 0;
  uint64_t seq = 0;

  json event() {
    const auto now = Clock::now();
    const EngineSnapshot snap = ctx->loop->snapshot();
    const FrontendSnapshot f = frontend_snapshot(*svr, *ctx);
    const ServerMetrics::Counters c = ctx->metrics->counters();
    const EngineStats& e = snap.stats;
    json j;
    j["seq"] = seq++;
    j["time"] = int64_t(std::time(nullptr));
    j["model"] = ctx->model_name;
    j["engine_dead"] = f.engine_dead;
    j["stopping"] = ctx->stopping.load();
    j["running"] = e.num_running;
    j["waiting"] = e.num_waiting + snap.queued;
    j["kv_cache_usage"] = e.num_blocks_total > 0 ? double(e.num_blocks_used) / e.num_blocks_total : 0.0;
    j["kv_blocks_used"] = e.num_blocks_used;
    j["kv_blocks_total"] = e.num_blocks_total;
    j["kv_blocks_peak"] = e.peak_blocks_used;
    j["prefix_cache_hit_rate"] = e.prefix_cache_query_tokens > 0
                                     ? double(e.prefix_cache_hit_tokens) / double(e.prefix_cache_query_tokens)
                                     : 0.0;
    j["prefix_cache_hits"] = e.prefix_cache_hit_tokens;
    j["prefix_cache_queries"] = e.prefix_cache_query_tokens;
    j["preemptions"] = e.preemptions;
    // Speculative decoding (zeros without --speculative): cumulative acceptance.
    j["spec_draft_tokens"] = e.spec_draft_tokens;
    j["spec_accepted_tokens"] = e.spec_accepted_tokens;
    j["spec_acceptance_rate"] = e.spec_acceptance_rate();
    j["steps"] = e.steps;
    j["batch_size_current"] = snap.last_batch_size;
    j["batch_size_max"] = e.max_batch_size;
    j["prompt_tokens_total"] = c.prompt_tokens;
    j["generation_tokens_total"] = c.generation_tokens;
    json fin = json::object();
    for (auto& [reason, n] : c.finished) fin[reason] = n;
    j["finished"] = fin;  // by finish_reason, as nanovllm_request_success_total
    json http = json::object();
    for (auto& [code, n] : c.http) http[std::to_string(code)] = n;
    j["http"] = http;
    j["connections"] = f.connections;
    // Throughput since the previous event, from the engine's own token counts (prefill tokens
    // computed, prefix-cache hits excluded; tokens decoded). null on the first event.
    const double busy = e.prefill_seconds + e.decode_seconds;
    if (first) {
      j["prompt_tps"] = nullptr;
      j["generation_tps"] = nullptr;
      j["step_ms"] = nullptr;
    } else {
      const double dt = std::chrono::duration<double>(now - prev_time).count();
      j["prompt_tps"] = dt > 0 ? double(e.prefill_tokens - prev_prefill) / dt : 0.0;
      j["generation_tps"] = dt > 0 ? double(e.decode_tokens - prev_decode) / dt : 0.0;
      const int64_t steps = e.steps - prev_steps;
      j["step_ms"] = steps > 0 ? json(1000.0 * (busy - prev_busy) / double(steps)) : json(nullptr);
    }
    const RecentSamples& tr = ctx->metrics->ttft_recent;
    j["window_s"] = tr.window().count();
    j["ttft"] = percentiles(tr.summary(now));
    j["itl"] = percentiles(ctx->metrics->itl_recent.summary(now));
    if (first) j["config"] = ctx->engine_config;  // static: sent once
    j["executor"] = e.executor;
    first = false;
    prev_time = now;
    prev_prefill = e.prefill_tokens;
    prev_decode = e.decode_tokens;
    prev_steps = e.steps;
    prev_busy = busy;
    return j;
  }
};

}  // namespace

void handle_stats_stream(ServerContext& ctx, const GuardedServer& svr, const httplib::Request& req,
                         httplib::Response& res) {
  auto st = std::make_shared<StatsStream>();
  st->ctx = &ctx;
  st->svr = &svr;
  if (req.has_param("interval_ms")) {
    int ms = 0;
    try {
      ms = std::stoi(req.get_param_value("interval_ms"));
    } catch (const std::exception&) {
      ms = -1;
    }
    if (ms < 100 || ms > 60000) {
      set_error(res, bad_request("'interval_ms' must be an integer in [100, 60000]", "interval_ms"));
      return;
    }
    st->interval = std::chrono::milliseconds(ms);
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  ctx.stats_streams++;  // the drain lets it end its chunked body before closing connections
  res.set_chunked_content_provider(
      "text/event-stream", [st](size_t, httplib::DataSink& sink) -> bool {
    // Wait for the next tick in short slices: a client that left, or a shutdown, ends the
    // stream within 100 ms (the connection thread is free, and the drain is not held up).
    while (Clock::now() < st->next) {
      if (st->ctx->stopping) {
        sink.done();
        return true;
      }
      if (!sink.is_writable()) return false;
      std::this_thread::sleep_for(std::min<Clock::duration>(100ms, st->next - Clock::now()));
    }
    if (st->ctx->stopping) {
      sink.done();
      return true;
    }
    st->next = Clock::now() + st->interval;
    const std::string out = sse_event(st->event());
    return sink.write(out.data(), out.size());
  },
      [st](bool) { st->ctx->stats_streams--; });
}

}  // namespace nanovllm::server
