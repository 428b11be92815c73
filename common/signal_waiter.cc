#include "common/signal_waiter.h"

#include <pthread.h>
#include <signal.h>

namespace spintune {
namespace {

sigset_t WaitedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR2);  // internal: wakes the thread for shutdown
  return set;
}

}  // namespace

void BlockShutdownSignals() {
  sigset_t set = WaitedSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
}

SignalWaiter::SignalWaiter(std::function<void(int)> on_signal)
    : on_signal_(std::move(on_signal)) {
  BlockShutdownSignals();
  thread_ = std::thread([this] {
    sigset_t waited = WaitedSignals();
    while (true) {
      int sig = 0;
      if (sigwait(&waited, &sig) != 0) continue;
      if (sig == SIGUSR2) return;
      on_signal_(sig);
    }
  });
}

SignalWaiter::~SignalWaiter() {
  pthread_kill(thread_.native_handle(), SIGUSR2);
  thread_.join();
}

}  // namespace spintune
