// SignalWaiter: turns SIGINT/SIGTERM into a callback on a normal thread.
//
// Construct it in main() before any other thread starts: it blocks the
// signals in the calling thread (so every later thread inherits the mask) and
// waits for them with sigwait() on its own thread. The callback runs at most
// once per signal, on that thread, so it may take locks.
#ifndef SPINTUNE_COMMON_SIGNAL_WAITER_H_
#define SPINTUNE_COMMON_SIGNAL_WAITER_H_

#include <functional>
#include <thread>

namespace spintune {

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
