#include "server/signals.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "util/check.h"

namespace nanovllm::server {
namespace {

// The one piece of process-wide state: a signal handler can reach nothing else.
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_shutdown_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  if (g_signal_pipe[1] >= 0) (void)!::write(g_signal_pipe[1], &b, 1);
}

}  // namespace

void install_signal_pipe() {
  if (g_signal_pipe[0] < 0) NV_CHECK(::pipe(g_signal_pipe) == 0, "pipe() failed");
  struct sigaction sa {};
  sa.sa_handler = on_shutdown_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A client that disconnects must not kill the process when we write to its socket.
  signal(SIGPIPE, SIG_IGN);
}

int wait_for_signal(int timeout_ms) {
  pollfd p{g_signal_pipe[0], POLLIN, 0};
  for (;;) {
    const int rc = ::poll(&p, 1, timeout_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return 0;
    unsigned char sig = 0;
    const ssize_t n = ::read(g_signal_pipe[0], &sig, 1);
    if (n < 0 && errno == EINTR) continue;
    return n == 1 ? int(sig) : 0;
  }
}

void wake_signal_waiter() {
  const unsigned char zero = 0;
  if (g_signal_pipe[1] >= 0) (void)!::write(g_signal_pipe[1], &zero, 1);
}

}  // namespace nanovllm::server
