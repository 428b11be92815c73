// SetUpProcess: what every spintune binary's main() does first.
#ifndef SPINTUNE_COMMON_PROCESS_SETUP_H_
#define SPINTUNE_COMMON_PROCESS_SETUP_H_

namespace spintune {

// Call first thing in main(), before any thread starts:
// - BlockShutdownSignals() (common/signal_waiter.h);
// - turns off absl::Mutex's deadlock detection. Debian builds abseil
//   without NDEBUG, so every lock of an absl::Mutex (gRPC's locks too)
//   also updates a process-wide lock graph under one global lock. Tests
//   keep the detection; the binaries do not pay for it.
void SetUpProcess();

}  // namespace spintune

#endif  // SPINTUNE_COMMON_PROCESS_SETUP_H_
