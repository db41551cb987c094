// SIGINT/SIGTERM delivery for the server: handlers (not sigwait: libraries such as OpenBLAS
// start threads before main, and a signal delivered to one of those would take the default
// action) write the signal number to a self-pipe; the shutdown thread reads it from there.
#pragma once

namespace nanovllm::server {

// Idempotent: creates the pipe, installs the handlers, ignores SIGPIPE.
void install_signal_pipe();
// The next signal number, or 0 after `timeout_ms` (< 0: wait forever) or after wake_signal_waiter().
int wait_for_signal(int timeout_ms);
// Makes a waiting wait_for_signal() return 0 (the server ends on its own).
void wake_signal_waiter();

}  // namespace nanovllm::server
