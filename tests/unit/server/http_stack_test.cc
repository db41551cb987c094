// The whole HTTP stack (GuardedServer + routes + handlers + engine loop over a tiny random
// model) driven through socket pairs with hostile input: framing, deadlines, byte caps,
// pipelining, half-closed clients, deep JSON, abandoned requests. Runs under ASan/UBSan.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "server/guarded_server.h"
#include "server/handlers.h"
#include "tiny_llm.h"

namespace nanovllm::server {
namespace {

using namespace std::chrono_literals;

struct Exchange {
  std::string out;   // everything the server sent before closing (or the timeout)
  double seconds;    // until the server closed
  bool closed;       // the server closed the connection
};

class HttpStackTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LLM& llm = test_support::TinyLLM::get();
    metrics_ = new ServerMetrics();
    loop_ = new EngineLoop(llm, *metrics_, 0);
    loop_->start();
    prep_ = new PrepGate(2, 16);
    ctx_ = new ServerContext();
    ctx_->loop = loop_;
    ctx_->metrics = metrics_;
    ctx_->prep = prep_;
    ctx_->model_name = "tiny";
    ctx_->max_model_len = llm.config().max_model_len;
    ctx_->max_body_bytes = 4096;
    ctx_->max_json_depth = 32;
    ConnLimits lim;
    lim.header_timeout = 400ms;
    lim.request_timeout = 800ms;
    lim.keep_alive_timeout = 300ms;
    lim.max_header_bytes = 2048;
    lim.max_body_wire_bytes = 3 * 4096;
    svr_ = new GuardedServer(lim, 8);
    install_routes(*svr_, *ctx_, "");
  }
  static void TearDownTestSuite() {
    loop_->stop();
    delete svr_;
    delete ctx_;
    delete prep_;
    delete loop_;
    delete metrics_;
  }

  // Sends `input` (then, if `half_close`, shuts down the sending side) on a fresh connection
  // served by the stack, and collects the replies until the server closes (at most `limit`).
  static Exchange exchange(const std::string& input, bool half_close, std::chrono::milliseconds limit = 5000ms,
                           std::chrono::milliseconds pause_after_send = 0ms) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    std::thread server([fd = sv[1]] { svr_->serve_socket(fd); });
    const auto t0 = std::chrono::steady_clock::now();
    std::thread writer([&] {
      size_t off = 0;
      while (off < input.size()) {
        const ssize_t n = ::send(sv[0], input.data() + off, input.size() - off, MSG_NOSIGNAL);
        if (n <= 0) break;  // the server closed (e.g. after a 413)
        off += size_t(n);
      }
      std::this_thread::sleep_for(pause_after_send);
      if (half_close) ::shutdown(sv[0], SHUT_WR);
    });
    Exchange ex{"", 0, false};
    timeval tv{0, 50000};
    ::setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[4096];
    while (std::chrono::steady_clock::now() - t0 < limit) {
      const ssize_t n = ::recv(sv[0], buf, sizeof(buf), 0);
      if (n > 0) ex.out.append(buf, size_t(n));
      if (n == 0) {
        ex.closed = true;
        break;
      }
    }
    ex.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ::shutdown(sv[0], SHUT_RDWR);  // let the server side end if it has not
    writer.join();
    server.join();
    ::close(sv[0]);
    return ex;
  }

  static int count(const std::string& s, const std::string& what) {
    int n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
  }

  static ServerMetrics* metrics_;
  static EngineLoop* loop_;
  static PrepGate* prep_;
  static ServerContext* ctx_;
  static GuardedServer* svr_;
};
ServerMetrics* HttpStackTest::metrics_ = nullptr;
EngineLoop* HttpStackTest::loop_ = nullptr;
PrepGate* HttpStackTest::prep_ = nullptr;
ServerContext* HttpStackTest::ctx_ = nullptr;
GuardedServer* HttpStackTest::svr_ = nullptr;

std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
         "\r\n" + body;
}

TEST_F(HttpStackTest, PipelinedRequestsAndConnectionClose) {
  const std::string gen = post("/v1/completions", R"({"prompt":[1,2,3],"max_tokens":2})");
  const Exchange ex = exchange(gen + "GET /health HTTP/1.1\r\nHost: t\r\nConnection: Close\r\n\r\n" +
                                   "GET /health HTTP/1.1\r\nHost: t\r\n\r\n",
                               false);
  EXPECT_EQ(count(ex.out, "HTTP/1.1 200 OK"), 2) << ex.out;  // the third request is never served
  EXPECT_NE(ex.out.find("\"completion_tokens\":2"), std::string::npos) << ex.out;
  EXPECT_NE(ex.out.find("Connection: close"), std::string::npos) << ex.out;
  EXPECT_TRUE(ex.closed);
  EXPECT_LT(ex.seconds, 1.0) << "closed by the keep-alive timeout instead of Connection: close";
}

TEST_F(HttpStackTest, FramingErrorsAreAnsweredAtOnce) {
  Exchange ex = exchange("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: -5\r\n\r\n", false);
  EXPECT_EQ(ex.out.rfind("HTTP/1.1 400", 0), 0u) << ex.out;
  EXPECT_NE(ex.out.find("invalid Content-Length '-5'"), std::string::npos) << ex.out;
  EXPECT_TRUE(ex.closed);
  EXPECT_LT(ex.seconds, 0.3);
  ex = exchange("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n", false);
  EXPECT_EQ(ex.out.rfind("HTTP/1.1 413", 0), 0u) << ex.out;
  EXPECT_LT(ex.seconds, 0.3);
  ex = exchange("POST /v1/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", false);
  EXPECT_EQ(ex.out.rfind("HTTP/1.1 501", 0), 0u) << ex.out;
  ex = exchange("POST /nowhere HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n", false);
  EXPECT_EQ(ex.out.rfind("HTTP/1.1 404", 0), 0u) << ex.out;
  EXPECT_TRUE(ex.closed);
}

TEST_F(HttpStackTest, ChunkedBodyIsLimited) {
  std::string chunks;
  for (int i = 0; i < 64; ++i) chunks += "100\r\n" + std::string(256, 'a') + "\r\n";  // 16 KiB > 4 KiB
  const Exchange ex = exchange(
      "POST /v1/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + "0\r\n\r\n", false);
  EXPECT_EQ(ex.out.rfind("HTTP/1.1 413", 0), 0u) << ex.out;
  EXPECT_NE(ex.out.find("--max-body-bytes"), std::string::npos) << ex.out;
  EXPECT_TRUE(ex.closed);
  // A chunk-size line that never ends is bounded by the wire cap, not memory.
  const Exchange ex2 = exchange("POST /v1/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
                                    std::string(20000, '1'),
                                false);
  EXPECT_TRUE(ex2.out.rfind("HTTP/1.1 413", 0) == 0 || ex2.out.rfind("HTTP/1.1 400", 0) == 0) << ex2.out;
}

TEST_F(HttpStackTest, DeadlinesAndHeaderCap) {
  // Headers that never end: 408 once the header deadline passes, not after a per-recv timeout.
  Exchange ex = exchange("GET /health HTTP/1.1\r\nHost: t\r\n", false, 3000ms);
  EXPECT_EQ(ex.out.rfind("HTTP/1.1 408", 0), 0u) << ex.out;
  EXPECT_NE(ex.out.find("--header-timeout"), std::string::npos) << ex.out;
  EXPECT_TRUE(ex.closed);
  EXPECT_LT(ex.seconds, 1.5);
  // A body that never completes: 408 at the request deadline.
  ex = exchange("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{\"prompt\"",
                false, 3000ms);
  EXPECT_EQ(ex.out.rfind("HTTP/1.1 408", 0), 0u) << ex.out;
  EXPECT_LT(ex.seconds, 2.0);
  // Too many header bytes: 431.
  std::string many = "GET /health HTTP/1.1\r\n";
  for (int i = 0; i < 100; ++i) many += "X-Pad-" + std::to_string(i) + ": " + std::string(40, 'p') + "\r\n";
  ex = exchange(many + "\r\n", false);
  EXPECT_EQ(ex.out.rfind("HTTP/1.1 431", 0), 0u) << ex.out;
  // A silent connection is closed after the header timeout without an answer.
  ex = exchange("", false, 3000ms);
  EXPECT_TRUE(ex.out.empty()) << ex.out;
  EXPECT_TRUE(ex.closed);
  EXPECT_LT(ex.seconds, 1.5);
}

TEST_F(HttpStackTest, GarbageFromAHalfClosedClientAlwaysGetsAnAnswer) {
  for (int i = 0; i < 20; ++i) {
    for (const std::string& junk : {std::string("GARBAGE\r\n"), std::string("\x16\x03\x01\x02\x00 no newline", 17),
                                    std::string("GET / HTTP/9.9\r\n\r\n"), std::string(3000, 'x') + "\r\n\r\n"}) {
      const Exchange ex = exchange(junk, true);
      EXPECT_TRUE(ex.out.rfind("HTTP/1.1 400", 0) == 0 || ex.out.rfind("HTTP/1.1 431", 0) == 0 ||
                  ex.out.rfind("HTTP/1.1 414", 0) == 0)
          << junk.substr(0, 20) << " -> " << ex.out;
      EXPECT_TRUE(ex.closed);
    }
  }
}

TEST_F(HttpStackTest, DeepJsonAndBadNumbersAre400) {
  const std::string deep = std::string(1500, '[') + std::string(1500, ']');  // within 4 KiB
  Exchange ex = exchange(post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi","x":)" + deep +
                                                          "}]}"),
                         true);
  EXPECT_EQ(ex.out.rfind("HTTP/1.1 400", 0), 0u) << ex.out.substr(0, 300);
  EXPECT_NE(ex.out.find("nested deeper than 32 levels"), std::string::npos) << ex.out.substr(0, 300);
  ex = exchange(post("/v1/completions", R"({"prompt":[1,2],"temperature":1e309})"), true);
  EXPECT_EQ(ex.out.rfind("HTTP/1.1 400", 0), 0u) << ex.out;
  EXPECT_NE(ex.out.find("number overflow"), std::string::npos) << ex.out;
  ex = exchange(post("/v1/completions", R"({"prompt":[],"max_tokens":2})"), true);
  EXPECT_EQ(ex.out.rfind("HTTP/1.1 400", 0), 0u) << ex.out;
  std::string ids = "1";
  for (int i = 1; i < 250; ++i) ids += ",1";
  ex = exchange(post("/v1/completions", "{\"prompt\":[" + ids + "],\"max_tokens\":16}"), true);
  EXPECT_EQ(ex.out.rfind("HTTP/1.1 400", 0), 0u) << ex.out;
  EXPECT_NE(ex.out.find("(16 > 256 - 250)"), std::string::npos) << ex.out;
}

// A non-streaming request whose client leaves is aborted: the engine stops generating for it.
TEST_F(HttpStackTest, AbandonedRequestIsAborted) {
  // A separate loop whose steps take 5 ms: 200 tokens would need a second.
  ServerMetrics m;
  EngineLoop slow(test_support::TinyLLM::get(), m, 0);
  slow.inject_step_delay(5ms);
  slow.start();
  EngineLoop* shared = ctx_->loop;
  ctx_->loop = &slow;
  const EngineStats before = slow.snapshot().stats;
  // The client sends the request, waits a little, and closes its side (then stops reading).
  const Exchange ex = exchange(post("/v1/completions", R"({"prompt":[5,6,7],"max_tokens":200,"ignore_eos":true})"),
                               true, 3000ms, 200ms);
  EXPECT_TRUE(ex.out.empty()) << ex.out.substr(0, 200);
  EXPECT_TRUE(ex.closed);
  EXPECT_LT(ex.seconds, 2.5);
  // Idle again, without having generated the 200 tokens.
  EngineSnapshot s = slow.snapshot();
  for (int i = 0; i < 100 && (s.stats.num_running > 0 || s.stats.num_blocks_used > 0); ++i) {
    std::this_thread::sleep_for(20ms);
    s = slow.snapshot();
  }
  ctx_->loop = shared;
  slow.stop();
  EXPECT_EQ(s.stats.num_running, 0);
  EXPECT_EQ(s.stats.num_blocks_used, 0);
  EXPECT_LT(s.stats.decode_tokens - before.decode_tokens, 150) << "the abandoned request kept generating";
  EXPECT_EQ(s.stats.aborted_requests, before.aborted_requests + 1);
}

TEST(ConnectionRegistry, EvictsTheLongestWaitingIdleConnectionElseRefuses) {
  int fds[6];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds + 2), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds + 4), 0);
  ConnLimits lim;
  Connection a(fds[0], lim), b(fds[2], lim), c(fds[4], lim);
  ConnectionRegistry reg(2);
  ASSERT_TRUE(reg.admit(&a));
  std::this_thread::sleep_for(2ms);
  ASSERT_TRUE(reg.admit(&b));
  // Both idle: the third evicts the one waiting longest (a).
  ASSERT_TRUE(reg.admit(&c));
  EXPECT_TRUE(a.was_shut_down());
  EXPECT_FALSE(b.was_shut_down());
  EXPECT_EQ(reg.size(), 2);
  EXPECT_EQ(reg.evicted(), 1);
  reg.remove(&a);
  // Both busy with a request: a new connection is refused.
  b.headers_complete();
  c.headers_complete();
  int more[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, more), 0);
  Connection d(more[0], lim);
  EXPECT_FALSE(reg.admit(&d));
  EXPECT_EQ(reg.refused(), 1);
  for (int fd : {fds[1], fds[3], fds[5], more[1]}) ::close(fd);
}

}  // namespace
}  // namespace nanovllm::server
