// SignalWaiter: turns SIGINT/SIGTERM into a callback on a normal thread.
//
// Call BlockShutdownSignals() first thing in main(), before any thread
// starts (gRPC, a trace reader): every later thread inherits the mask, so
// SIGINT/SIGTERM can only reach the SignalWaiter, which may be constructed
// later, once there is something to stop. It waits with sigwait() on its own
// thread; the callback runs once per signal, on that thread, so it may take
// locks.
#ifndef SPINTUNE_COMMON_SIGNAL_WAITER_H_
#define SPINTUNE_COMMON_SIGNAL_WAITER_H_

#include <functional>
#include <thread>

namespace spintune {

// Blocks SIGINT and SIGTERM in the calling thread and restores their default
// disposition: a shell starts background jobs with SIGINT ignored, and an
// ignored signal would be discarded instead of reaching sigwait().
void BlockShutdownSignals();

class SignalWaiter {
 public:
  // `on_signal` receives the signal number.
  explicit SignalWaiter(std::function<void(int)> on_signal);
  // Stops the waiting thread.
  ~SignalWaiter();
  SignalWaiter(const SignalWaiter&) = delete;
  SignalWaiter& operator=(const SignalWaiter&) = delete;

 private:
  std::function<void(int)> on_signal_;
  std::thread thread_;
};

}  // namespace spintune

#endif  // SPINTUNE_COMMON_SIGNAL_WAITER_H_
