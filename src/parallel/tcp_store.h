// The rendezvous store of a tensor-parallel group: a key/value map served over TCP by rank 0
// (TcpStoreServer) and read by every rank (TcpStore, gloo's rendezvous::Store interface, which
// gloo's connectFullMesh uses to exchange the ranks' listening addresses; the NCCL unique id
// travels the same way). Used only while a group forms: nothing on the per-step path.
//
// Wire format (little endian, one request then one reply on a connection):
//   request  u8 op ('S' set | 'G' get | 'C' check), u32 key_len, key, [u32 val_len, val]
//   reply    set: u8 1; check: u8 0/1; get: u8 0/1, [u32 val_len, val]
// get never blocks the server: clients poll (TcpStore::wait) until a key exists, so one server
// thread serves every rank with plain poll(2).
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/store.h>

namespace nanovllm {

// "host:port" -> (host, port); clear error on anything else. Port 0 is allowed (any free port).
std::pair<std::string, int> parse_host_port(const std::string& addr);

class TcpStoreServer {
 public:
  // Listens on host:port (port 0: a free port, see port()). Serves until destroyed.
  TcpStoreServer(const std::string& host, int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }

 private:
  void serve();
  int listen_fd_ = -1;
  int wake_fd_[2] = {-1, -1};  // pipe: the destructor wakes the poll loop
  int port_ = 0;
  std::map<std::string, std::vector<char>> data_;
  std::thread thread_;
};

class TcpStore : public gloo::rendezvous::Store {
 public:
  // Connects to a TcpStoreServer at host:port, retrying until `timeout` (rank 0 may start later).
  // `abort_check` (optional) runs between polls and may throw to stop a wait early (rank 0 uses
  // it to notice a worker that exited before joining).
  TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout,
           std::function<void()> abort_check = {});
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;  // waits up to the timeout
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  // The local address this machine uses to reach the store: the interface the other ranks can
  // reach this rank on (gloo listens there).
  const std::string& local_ip() const { return local_ip_; }

 private:
  std::vector<char> request(char op, const std::string& key, const std::vector<char>* val,
                            bool* found);
  std::string host_;
  int port_ = 0;
  std::chrono::milliseconds timeout_;
  std::function<void()> abort_check_;
  std::string local_ip_;
};

}  // namespace nanovllm
