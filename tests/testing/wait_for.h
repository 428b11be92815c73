// WaitFor: what a test does instead of a fixed sleep sized on one host: it
// waits for the event it needs (N completions seen, a table applied, an
// agent connected), polling, with a deadline generous enough for a loaded
// machine. The deadline only bounds a failing test; a passing one returns
// as soon as the event is there.
//
// Thread-safety: `done` is called on the caller's thread only.
#ifndef SPINTUNE_TESTS_TESTING_WAIT_FOR_H_
#define SPINTUNE_TESTS_TESTING_WAIT_FOR_H_

#include <chrono>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace spintune::testing {

// How long a test waits for an event that should take well under a second
// on a quiet machine, when both cores are busy with other work.
inline constexpr absl::Duration kEventDeadline = absl::Seconds(30);

// Calls `done` every `poll` until it returns true (returns true) or
// `timeout` has passed (returns false, after one last call).
template <typename Done>
bool WaitFor(Done&& done, absl::Duration timeout = kEventDeadline,
             absl::Duration poll = absl::Milliseconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= deadline) return done();
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(poll));
  }
  return true;
}

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_WAIT_FOR_H_
