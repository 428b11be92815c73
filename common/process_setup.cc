#include "common/process_setup.h"

#include "absl/synchronization/mutex.h"
#include "common/signal_waiter.h"

namespace spintune {

void SetUpProcess() {
  BlockShutdownSignals();
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace spintune
