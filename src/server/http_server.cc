// Server setup: options, the engine loop, the listening socket, and the SIGTERM drain
// (routes: routes.cc).
#include "server/http_server.h"

#include "tokenizer/tokenizer.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <thread>

#include "nanovllm/llm.h"
#include "server/guarded_server.h"
#include "server/handlers.h"
#include "server/response_store.h"
#include "models/pooling_config.h"
#include "server/signals.h"
#include "util/check.h"

namespace nanovllm::server {

using nlohmann::json;
using namespace std::chrono_literals;

void install_shutdown_handlers() { install_signal_pipe(); }

void validate(const ServerOptions& o) {
  NV_CHECK(o.port >= 0 && o.port <= 65535, "--port must be in [0, 65535], got ", o.port);
  NV_CHECK(o.max_waiting >= 0, "--max-waiting must be >= 0 (0: unbounded), got ", o.max_waiting);
  NV_CHECK(o.max_connections >= 1, "--max-connections must be >= 1, got ", o.max_connections);
  NV_CHECK(o.max_body_bytes >= 1, "--max-body-bytes must be >= 1");
  NV_CHECK(o.max_json_depth >= 2 && o.max_json_depth <= 10000, "--max-json-depth must be in [2, 10000], got ",
           o.max_json_depth);
  for (auto [v, name] : {std::pair{o.header_timeout_s, "--header-timeout"}, {o.request_timeout_s, "--request-timeout"},
                         {o.keep_alive_timeout_s, "--keep-alive-timeout"}})
    NV_CHECK(v > 0 && v <= 86400, name, " must be in (0, 86400] seconds, got ", v);
  NV_CHECK(o.shutdown_timeout_s >= 0 && o.shutdown_timeout_s <= 86400,
           "--shutdown-timeout must be in [0, 86400] seconds, got ", o.shutdown_timeout_s);
  NV_CHECK(o.preprocess_threads >= 1, "--preprocess-threads must be >= 1, got ", o.preprocess_threads);
  NV_CHECK(o.max_stored_responses >= 0 && o.max_stored_responses <= 1000000,
           "--max-stored-responses must be in [0, 1000000], got ", o.max_stored_responses);
}

namespace {

std::chrono::milliseconds to_ms(double seconds) { return std::chrono::milliseconds(int64_t(seconds * 1000)); }

// One thread per connection needs one descriptor per connection: raise the soft limit.
void raise_fd_limit(int max_connections) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  const rlim_t want = rlim_t(max_connections) + 256;
  if (rl.rlim_cur < want) {
    rl.rlim_cur = std::min(want, rl.rlim_max);
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur < want)
    std::fprintf(stderr, "nanovllm: warning: --max-connections %d needs %llu file descriptors, the limit is %llu\n",
                 max_connections, (unsigned long long)want, (unsigned long long)rl.rlim_cur);
}

}  // namespace

int run_server(LLM& llm, const ServerOptions& opt) {
  validate(opt);
  install_shutdown_handlers();
  raise_fd_limit(opt.max_connections);
  ServerMetrics metrics;
  EngineLoop loop(llm, metrics, opt.max_waiting);
  if (opt.test_fault_after_steps >= 0) loop.inject_fault_after_steps(opt.test_fault_after_steps);
  if (opt.test_step_delay_ms > 0) loop.inject_step_delay(std::chrono::milliseconds(opt.test_step_delay_ms));
  PrepGate prep(opt.preprocess_threads, opt.max_waiting);
  ServerContext ctx;
  ctx.responses = std::make_shared<ResponseStore>(size_t(opt.max_stored_responses));
  ctx.loop = &loop;
  ctx.metrics = &metrics;
  ctx.prep = &prep;
  ctx.tokenizer = llm.tokenizer();
  ctx.llm = &llm;
  ctx.embed = llm.config().task == "embed";
  if (ctx.embed) {
    std::optional<PoolingConfig> pc = PoolingConfig::from_dir(llm.config().model);
    ctx.embed_normalize = pc ? pc->normalize : true;
  }
  if (ctx.tokenizer) {
    const std::string& tmpl = ctx.tokenizer->chat_template();
    ctx.reasoning = tmpl.find("<think>") != std::string::npos;  // Qwen3, DeepSeek-R1 style
    ctx.tool_format = chat::tool_call_format_for_template(tmpl);
  }
  ctx.model_path = llm.config().model;
  ctx.trace_requests = llm.config().trace_requests;
  ctx.model_name = opt.served_model_name.empty() ? ctx.model_path : opt.served_model_name;
  ctx.max_model_len = llm.config().max_model_len;
  ctx.webui = opt.webui;
  {
    const Config& c = llm.config();
    const EngineStats st = llm.stats();
    ctx.engine_config = json{{"model", ctx.model_name},
                             {"max_model_len", c.max_model_len},
                             {"max_num_seqs", c.max_num_seqs},
                             {"max_num_batched_tokens", c.max_num_batched_tokens},
                             {"kvcache_block_size", c.kvcache_block_size},
                             {"num_kvcache_blocks", st.num_blocks_total},
                             {"kv_cache_dtype", c.kv_cache_dtype},
                             {"quantization", c.quantization},
                             {"device", c.device},
                             {"policy", c.policy},
                             {"enable_prefix_caching", c.enable_prefix_caching},
                             {"tensor_parallel_size", c.tensor_parallel_size},
                             {"executor", st.executor},
                             {"num_threads", st.num_threads},
                             {"reasoning", ctx.reasoning}};
  }
  ctx.max_body_bytes = opt.max_body_bytes;
  ctx.max_json_depth = opt.max_json_depth;
  ctx.prep_timeout = to_ms(opt.request_timeout_s);

  ConnLimits limits;
  limits.header_timeout = to_ms(opt.header_timeout_s);
  limits.request_timeout = to_ms(opt.request_timeout_s);
  limits.keep_alive_timeout = to_ms(opt.keep_alive_timeout_s);
  // Chunk framing costs bytes too; a body needs at most about twice its size on the wire
  // unless it is sent in chunks of a few bytes.
  limits.max_body_wire_bytes = 2 * opt.max_body_bytes + (64 << 10);
  limits.linger_bytes = limits.max_body_wire_bytes;
  GuardedServer svr(limits, opt.max_connections);
  // A thread per connection; a few beyond the limit so that refusals (503) are answered at once.
  const size_t threads = size_t(opt.max_connections) + 32;
  svr.new_task_queue = [threads] { return new ConnectionThreads(threads); };
  svr.set_payload_max_length(opt.max_body_bytes);
  int listen_fd = -1;
  // SO_REUSEADDR only (httplib's default SO_REUSEPORT would let two servers share a port).
  svr.set_socket_options([&listen_fd](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = sock;
  });
  install_routes(svr, ctx, opt.api_key);

  int port = opt.port;
  if (opt.port == 0) {
    port = svr.bind_to_any_port(opt.host);
    NV_CHECK(port > 0, "cannot listen on ", opt.host, " (any port)");
  } else {
    NV_CHECK(svr.bind_to_port(opt.host, opt.port), "cannot listen on ", opt.host, ":", opt.port,
             " (address in use or not available)");
  }
  // httplib listens with a backlog of 5; hundreds of clients connecting at once need more.
  NV_CHECK(listen_fd >= 0, "the listening socket was not created");
  ::listen(listen_fd, 4096);

  loop.start();
  std::atomic<bool> listen_returned{false};
  // Shutdown: the first SIGINT/SIGTERM stops accepting and drains; a second one exits at once.
  std::thread signals([&] {
    auto exit_on_second = [](int sig) {
      if (sig <= 0) return;
      std::fprintf(stderr, "nanovllm: second signal %d: exiting now\n", sig);
      std::_Exit(128 + sig);
    };
    const int sig = wait_for_signal(-1);
    if (sig == 0) return;  // woken by run_server itself: nothing to stop
    std::fprintf(stderr, "nanovllm: signal %d: draining for up to %.1f s (a second signal exits at once)\n", sig,
                 opt.shutdown_timeout_s);
    ctx.stopping = true;
    // No new connections: shut the listening socket down, so that accept() fails and the accept
    // loop ends. Not svr.stop(): httplib then cuts every chunked response (SSE streams) short.
    ::shutdown(listen_fd, SHUT_RDWR);
    svr.drain();  // keep-alive ends, connections between requests close
    const auto deadline = Clock::now() + to_ms(opt.shutdown_timeout_s);
    while (ctx.active_requests.load() > 0 && Clock::now() < deadline) exit_on_second(wait_for_signal(20));
    if (ctx.active_requests.load() > 0)
      std::fprintf(stderr, "nanovllm: aborting %d request(s) still in flight\n", ctx.active_requests.load());
    loop.stop();  // aborts the rest: streams end with finish_reason "abort" and [DONE]
    const auto flush_deadline = Clock::now() + 2s;  // for those last chunks to be written
    // (stats streams see ctx.stopping and end their bodies within 100 ms: a dashboard gets a
    // complete response rather than a cut one)
    while ((ctx.active_requests.load() > 0 || ctx.stats_streams.load() > 0) && Clock::now() < flush_deadline)
      exit_on_second(wait_for_signal(20));
    svr.close_all();
    while (!listen_returned.load()) exit_on_second(wait_for_signal(50));
  });

  std::printf("nanovllm: listening on http://%s:%d\n", opt.host.c_str(), port);
  std::fflush(stdout);
  const bool ok = svr.listen_after_bind();  // returns once every connection thread has ended
  listen_returned = true;
  const bool by_signal = ctx.stopping;
  if (!by_signal) wake_signal_waiter();  // listen failed on its own: let the signal thread end
  signals.join();
  loop.stop();
  std::fprintf(stderr, "nanovllm: server stopped\n");
  if (!by_signal) std::fprintf(stderr, "nanovllm: the listening socket failed (%s)\n", ok ? "closed" : "error");
  return by_signal ? 0 : 1;
}

}  // namespace nanovllm::server
