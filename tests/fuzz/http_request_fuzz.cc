// libFuzzer target for the server's request path: the input is the raw byte stream a client
// sends on one connection (any number of pipelined requests), served by the real stack
// (GuardedServer connection loop -> httplib parsing -> our framing checks, body limits, routes,
// JSON parsing, request validation, chat-template rendering and tokenization, and the engine
// for whatever survives) over a socket pair, the client half-closed after the input. Nothing
// may crash, hang or leak (ASan/UBSan), and every answer must start with a status line.
// Build with `make fuzz` (clang); run e.g.
//   build-fuzz/fuzz_http_request -max_total_time=300 -jobs=1 tests/fuzz/corpus/http_request
// The model is a tiny random Qwen3 (with the Qwen3 tokenizer and chat template when the npm
// package is present), max_model_len 32, so generations stay short.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "../unit/server/tiny_llm.h"
#include "server/guarded_server.h"
#include "server/handlers.h"

namespace {

using namespace nanovllm;
using namespace nanovllm::server;

struct Stack {
  std::unique_ptr<LLM> llm;
  ServerMetrics metrics;
  std::unique_ptr<EngineLoop> loop;
  std::unique_ptr<PrepGate> prep;
  ServerContext ctx;
  std::unique_ptr<GuardedServer> svr;

  Stack() {
    const auto dir = std::filesystem::temp_directory_path() / ("nv_http_fuzz_" + std::to_string(::getpid()));
    llm = test_support::make_tiny_llm(dir, 32, 1);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);  // loaded (weights mapped, tokenizer in memory)
    loop = std::make_unique<EngineLoop>(*llm, metrics, 64);
    loop->start();
    prep = std::make_unique<PrepGate>(2, 64);
    ctx.loop = loop.get();
    ctx.metrics = &metrics;
    ctx.prep = prep.get();
    ctx.tokenizer = llm->tokenizer();
    ctx.model_name = "tiny";
    ctx.model_path = dir.string();
    ctx.max_model_len = llm->config().max_model_len;
    ctx.max_body_bytes = 16 << 10;
    ctx.max_json_depth = 32;
    ConnLimits lim;
    lim.header_timeout = std::chrono::milliseconds(300);
    lim.request_timeout = std::chrono::milliseconds(500);
    lim.keep_alive_timeout = std::chrono::milliseconds(200);
    lim.max_header_bytes = 8 << 10;
    lim.max_body_wire_bytes = 40 << 10;
    lim.linger_time = std::chrono::milliseconds(200);
    svr = std::make_unique<GuardedServer>(lim, 8);
    install_routes(*svr, ctx, "");
    std::fprintf(stderr, "http fuzz: model %s, tokenizer %s\n", dir.c_str(), ctx.tokenizer ? "yes" : "no");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Stack* stack = new Stack();  // lives for the whole run (its threads too)
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) std::abort();
  std::string replies;
  std::thread client([&] {
    size_t off = 0;
    while (off < size) {
      const ssize_t n = ::send(sv[0], data + off, size - off, MSG_NOSIGNAL);
      if (n <= 0) break;  // the server closed early (e.g. after a 413)
      off += size_t(n);
    }
    ::shutdown(sv[0], SHUT_WR);
    char buf[8192];
    for (;;) {
      const ssize_t n = ::recv(sv[0], buf, sizeof(buf), 0);
      if (n <= 0) break;
      replies.append(buf, size_t(n));
    }
  });
  stack->svr->serve_socket(sv[1]);  // closes sv[1]
  client.join();
  ::close(sv[0]);
  if (!replies.empty() && replies.rfind("HTTP/1.1 ", 0) != 0) {
    std::fprintf(stderr, "reply without a status line: %.80s\n", replies.c_str());
    std::abort();
  }
  return 0;
}
