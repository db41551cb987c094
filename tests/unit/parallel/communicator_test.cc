// The gloo communicator and the rendezvous store across real processes: each test forks its
// ranks (before this process starts any thread), every rank forms the group through the TCP
// store on 127.0.0.1, runs the collectives, and reports what it got through a pipe. References
// are computed here independently (exact integer-valued sums, index arithmetic).
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "parallel/gloo_communicator.h"
#include "parallel/process_group.h"
#include "parallel/tcp_store.h"

using namespace nanovllm;
using ::testing::HasSubstr;
using ::testing::AnyOf;

namespace {

// A free port on 127.0.0.1: a store server picks one, and is closed before the ranks start.
int free_port() {
  TcpStoreServer s("127.0.0.1", 0);
  return s.port();
}

DistOptions options(int rank, int world, int port) {
  DistOptions o;
  o.rank = rank;
  o.world = world;
  o.init_addr = "127.0.0.1:" + std::to_string(port);
  o.timeout = std::chrono::milliseconds(20000);
  return o;
}

// Forks `world` ranks running body(rank, comm) -> bytes written back; returns each rank's
// bytes (empty and failed=true for a rank that threw or crashed; its message in `errors`).
struct RankResult {
  std::string out;
  bool ok = false;
};
std::vector<RankResult> run_ranks(int world,
                                  const std::function<std::string(int, Communicator&)>& body) {
  const int port = free_port();
  std::vector<int> read_fds;
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      std::string out;
      int code = 0;
      try {
        ProcessGroup pg(options(r, world, port));
        GlooCommunicator comm(pg.control(), pg.make_group("data", false, std::chrono::seconds(20)));
        out = "OK" + body(r, comm);
      } catch (const std::exception& e) {
        out = std::string("ERR") + e.what();
        code = 1;
      }
      const size_t n = out.size();
      (void)!::write(fds[1], &n, sizeof n);
      (void)!::write(fds[1], out.data(), n);
      std::_Exit(code);
    }
    ::close(fds[1]);
    read_fds.push_back(fds[0]);
    pids.push_back(pid);
  }
  std::vector<RankResult> res(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    size_t n = 0;
    if (::read(read_fds[size_t(r)], &n, sizeof n) == ssize_t(sizeof n)) {
      std::string s(n, '\0');
      size_t got = 0;
      while (got < n) {
        ssize_t k = ::read(read_fds[size_t(r)], s.data() + got, n - got);
        if (k <= 0) break;
        got += size_t(k);
      }
      res[size_t(r)].ok = s.rfind("OK", 0) == 0;
      res[size_t(r)].out = s.substr(res[size_t(r)].ok ? 2 : 3);
    }
    ::close(read_fds[size_t(r)]);
    int status = 0;
    ::waitpid(pids[size_t(r)], &status, 0);
  }
  return res;
}

std::string floats_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

}  // namespace

TEST(TcpStore, ParsesAddressesWithClearErrors) {
  EXPECT_EQ(parse_host_port("127.0.0.1:29500"), std::make_pair(std::string("127.0.0.1"), 29500));
  for (const char* bad : {"127.0.0.1", ":29500", "host:", "host:http", "host:70000", "host:-1"}) {
    try {
      parse_host_port(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string("rendezvous address '") + bad + "'")) << bad;
    }
  }
}

TEST(TcpStore, SetGetWaitAndTimeout) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStore a("127.0.0.1", server.port(), std::chrono::milliseconds(2000));
  TcpStore b("127.0.0.1", server.port(), std::chrono::milliseconds(300));
  EXPECT_EQ(a.local_ip(), "127.0.0.1");
  a.set("k", {'x', 'y', '\0', 'z'});
  EXPECT_EQ(b.get("k"), (std::vector<char>{'x', 'y', '\0', 'z'}));
  a.set("k", {});
  EXPECT_TRUE(b.get("k").empty());
  try {
    b.wait({"never"});
    ADD_FAILURE() << "wait on a missing key returned";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'never'"));
  }
}

TEST(TcpStore, UnreachableServerIsAClearErrorWithinTheTimeout) {
  const int port = free_port();  // nothing listens there now
  const auto t0 = std::chrono::steady_clock::now();
  try {
    TcpStore s("127.0.0.1", port, std::chrono::milliseconds(300));
    ADD_FAILURE() << "connected to nothing";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot reach the rendezvous store"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

// Sums of small integers are exact in f32, so every rank must hold exactly the reference; with
// random floats the ranks must still agree bit for bit (3 ranks: the chunked ring).
TEST(GlooCommunicator, AllReduceExactAndIdenticalOnEveryRank) {
  for (int world : {2, 3}) {
    const int n = 1000;
    auto res = run_ranks(world, [&](int rank, Communicator& comm) {
      std::vector<float> ints(n), rnd(n);
      std::mt19937 rng(uint32_t(100 + rank));
      for (int i = 0; i < n; ++i) {
        ints[size_t(i)] = float((i * 7 + rank * 13) % 101 - 50);
        rnd[size_t(i)] = std::uniform_real_distribution<float>(-1, 1)(rng);
      }
      Tensor a = Tensor::wrap(ints.data(), {n}, DType::F32), b = Tensor::wrap(rnd.data(), {10, 100}, DType::F32);
      comm.all_reduce_sum(a);
      comm.all_reduce_sum(b);
      return floats_bytes(ints) + floats_bytes(rnd);
    });
    for (int r = 0; r < world; ++r) ASSERT_TRUE(res[size_t(r)].ok) << res[size_t(r)].out;
    std::vector<float> got(2 * n);
    std::memcpy(got.data(), res[0].out.data(), got.size() * 4);
    for (int i = 0; i < n; ++i) {
      float want = 0;
      for (int r = 0; r < world; ++r) want += float((i * 7 + r * 13) % 101 - 50);
      ASSERT_EQ(got[size_t(i)], want) << "world " << world << " element " << i;
    }
    for (int r = 1; r < world; ++r)
      EXPECT_EQ(res[size_t(r)].out, res[0].out) << "rank " << r << " differs from rank 0";
  }
}

// Vocab-parallel LM head: rank r's [S, n] block lands in columns [r n, r n + n) of [S, N] on
// the root; the last rank's padding columns (N < world n) are dropped.
TEST(GlooCommunicator, GatherLastDimDropsPaddingColumns) {
  const int world = 3, S = 4, n = 5, N = 13;  // 3 * 5 = 15 columns, 2 of padding
  auto res = run_ranks(world, [&](int rank, Communicator& comm) {
    std::vector<float> part(S * n);
    for (int s = 0; s < S; ++s)
      for (int c = 0; c < n; ++c) part[size_t(s * n + c)] = float(1000 * s + rank * n + c);
    Tensor p = Tensor::wrap(part.data(), {S, n}, DType::F32);
    Tensor out = rank == 0 ? Tensor::empty({S, N}, DType::F32) : Tensor();
    comm.gather_last_dim(p, rank == 0 ? &out : nullptr, 0);
    if (rank != 0) return std::string();
    return floats_bytes(std::vector<float>(out.data<float>(), out.data<float>() + S * N));
  });
  for (int r = 0; r < world; ++r) ASSERT_TRUE(res[size_t(r)].ok) << res[size_t(r)].out;
  std::vector<float> got(S * N);
  std::memcpy(got.data(), res[0].out.data(), got.size() * 4);
  for (int s = 0; s < S; ++s)
    for (int c = 0; c < N; ++c) EXPECT_EQ(got[size_t(s * N + c)], float(1000 * s + c)) << s << "," << c;
}

TEST(GlooCommunicator, BroadcastMinAndBarrier) {
  auto res = run_ranks(2, [&](int rank, Communicator& comm) {
    char msg[6] = {};
    if (rank == 0) std::memcpy(msg, "hello", 6);
    comm.broadcast_bytes(msg, 6, 0);
    const int64_t m = comm.all_reduce_min(rank == 0 ? 70 : 42);
    comm.barrier();
    return std::string(msg) + ":" + std::to_string(m);
  });
  for (auto& r : res) {
    ASSERT_TRUE(r.ok) << r.out;
    EXPECT_EQ(r.out, "hello:42");
  }
}

// A peer that exits mid-group: the survivor's next collective fails at once with an error
// naming the operation and the rank, never a hang. One all-reduce together first, so the data
// group is connected (it connects on first use; a peer gone before that is a connect error,
// tested by the second case).
TEST(GlooCommunicator, PeerExitIsAClearErrorNotAHang) {
  const auto t0 = std::chrono::steady_clock::now();
  auto res = run_ranks(2, [&](int rank, Communicator& comm) {
    std::vector<float> v(1024, 1.f);
    Tensor t = Tensor::wrap(v.data(), {1024}, DType::F32);
    comm.all_reduce_sum(t);
    if (rank == 1) std::_Exit(0);  // gone without a word
    comm.all_reduce_sum(t);
    return std::string("no error");
  });
  EXPECT_FALSE(res[0].ok);
  EXPECT_THAT(res[0].out, HasSubstr("tensor-parallel all_reduce failed on rank 0 of 2"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15));
}

// A peer gone before the data group connects: a clear connect error, never a hang.
TEST(GlooCommunicator, PeerExitBeforeConnectIsAClearError) {
  const auto t0 = std::chrono::steady_clock::now();
  auto res = run_ranks(2, [&](int rank, Communicator& comm) {
    if (rank == 1) std::_Exit(0);
    std::vector<float> v(1024, 1.f);
    Tensor t = Tensor::wrap(v.data(), {1024}, DType::F32);
    comm.all_reduce_sum(t);
    return std::string("no error");
  });
  EXPECT_FALSE(res[0].ok);
  EXPECT_THAT(res[0].out, HasSubstr("on rank 0 of 2"));
  EXPECT_THAT(res[0].out, AnyOf(HasSubstr("tensor-parallel all_reduce failed"),
                                HasSubstr("tensor-parallel connect failed")));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15));
}

TEST(ProcessGroup, RejectsBadRanksAndAddresses) {
  auto msg = [](DistOptions o) {
    try {
      ProcessGroup pg(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  DistOptions o;
  o.world = 2;
  o.rank = 2;
  EXPECT_THAT(msg(o), HasSubstr("rank 2 is outside [0, 2)"));
  o.rank = 1;
  EXPECT_THAT(msg(o), HasSubstr("needs --dist-init-addr"));
  o.init_addr = "localhost:0";
  EXPECT_THAT(msg(o), HasSubstr("needs rank 0's port"));
  o.rank = 0;
  o.init_addr = "";
  o.worker_command = {"/nonexistent/nanovllm", "worker"};
  EXPECT_THAT(msg(o), HasSubstr("worker program '/nonexistent/nanovllm' is not executable"));
}
