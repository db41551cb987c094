// Body framing and Connection handling decided from the headers, before any body byte is read.
#include <gtest/gtest.h>

#include "server/http_framing.h"

namespace nanovllm::server {
namespace {

httplib::Headers H(std::initializer_list<std::pair<const char*, const char*>> kv) {
  httplib::Headers h;
  for (auto& [k, v] : kv) h.emplace(k, v);
  return h;
}

int status_of(const httplib::Headers& h, uint64_t max = 1000) {
  try {
    (void)body_framing(h, max);
  } catch (const ApiError& e) {
    return e.status;
  }
  return 200;
}

TEST(Framing, ContentLength) {
  auto f = body_framing(H({{"Content-Length", "42"}}), 1000);
  EXPECT_EQ(f.kind, BodyFraming::Kind::kLength);
  EXPECT_EQ(f.length, 42u);
  EXPECT_FALSE(body_framing(H({{"Content-Length", "0"}}), 1000).has_body());
  EXPECT_FALSE(body_framing(H({}), 1000).has_body());  // no framing header: no body
  EXPECT_EQ(body_framing(H({{"content-length", " 7 "}}), 1000).length, 7u);  // names are case-insensitive
  EXPECT_EQ(body_framing(H({{"Content-Length", "5"}, {"Content-Length", "5"}}), 1000).length, 5u);
  EXPECT_EQ(status_of(H({{"Content-Length", "1000"}})), 200);
  EXPECT_EQ(status_of(H({{"Content-Length", "1001"}})), 413);
  EXPECT_EQ(status_of(H({{"Content-Length", "99999999999999999999999"}})), 400);
  for (const char* bad : {"-5", "", "+5", "5x", "0x10", "1 2", "1e3", "18446744073709551611"})
    EXPECT_EQ(status_of(H({{"Content-Length", bad}})), 400) << bad;
  EXPECT_EQ(status_of(H({{"Content-Length", "5"}, {"Content-Length", "6"}})), 400);
  try {
    (void)body_framing(H({{"Content-Length", "-5"}}), 1000);
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid Content-Length '-5'"), std::string::npos) << e.what();
  }
}

TEST(Framing, TransferEncoding) {
  EXPECT_EQ(body_framing(H({{"Transfer-Encoding", "chunked"}}), 10).kind, BodyFraming::Kind::kChunked);
  EXPECT_EQ(body_framing(H({{"transfer-encoding", " Chunked"}}), 10).kind, BodyFraming::Kind::kChunked);
  EXPECT_EQ(status_of(H({{"Transfer-Encoding", "gzip, chunked"}})), 501);
  EXPECT_EQ(status_of(H({{"Transfer-Encoding", "identity"}})), 501);
  EXPECT_EQ(status_of(H({{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}})), 400);
  EXPECT_EQ(status_of(H({{"Transfer-Encoding", "chunked"}, {"Content-Length", "3"}})), 400);  // smuggling
}

TEST(Framing, ConnectionClose) {
  EXPECT_TRUE(wants_connection_close(H({{"Connection", "close"}}), "HTTP/1.1"));
  EXPECT_TRUE(wants_connection_close(H({{"Connection", "Close"}}), "HTTP/1.1"));
  EXPECT_TRUE(wants_connection_close(H({{"Connection", "keep-alive, close"}}), "HTTP/1.1"));
  EXPECT_TRUE(wants_connection_close(H({{"Connection", "TE"}, {"connection", " CLOSE "}}), "HTTP/1.1"));
  EXPECT_FALSE(wants_connection_close(H({{"Connection", "keep-alive"}}), "HTTP/1.1"));
  EXPECT_FALSE(wants_connection_close(H({{"Connection", "closed"}}), "HTTP/1.1"));
  EXPECT_FALSE(wants_connection_close(H({}), "HTTP/1.1"));
  EXPECT_TRUE(wants_connection_close(H({}), "HTTP/1.0"));
  EXPECT_FALSE(wants_connection_close(H({{"Connection", "Keep-Alive"}}), "HTTP/1.0"));
}

}  // namespace
}  // namespace nanovllm::server
