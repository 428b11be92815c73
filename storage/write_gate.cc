#include "storage/write_gate.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace spintune {

bool WriteGate::MayEnter(WritePriority priority) const {
  if (held_) return false;
  // Waiting writers of the other kind, whose turn it is: they go first.
  const int others =
      priority == WritePriority::kUrgent ? background_waiting_ : urgent_waiting_;
  return others == 0 || last_ != priority;
}

void WriteGate::Enter(WritePriority priority) {
  absl::MutexLock lock(&mu_);
  const bool urgent = priority == WritePriority::kUrgent;
  if (urgent) {
    ++counts_.urgent;
  } else {
    ++counts_.background;
  }
  if (!MayEnter(priority)) {
    const absl::Time asked = absl::Now();
    if (urgent) ++counts_.urgent_waited;
    int& waiting = urgent ? urgent_waiting_ : background_waiting_;
    ++waiting;
    struct Args {
      const WriteGate* gate;
      WritePriority priority;
    } args{this, priority};
    mu_.Await(absl::Condition(
        +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS { return a->gate->MayEnter(a->priority); },
        &args));
    --waiting;
    if (urgent) counts_.urgent_wait_seconds += absl::ToDoubleSeconds(absl::Now() - asked);
  }
  held_ = true;
  last_ = priority;
  entered_ = absl::Now();
}

void WriteGate::Leave() {
  absl::MutexLock lock(&mu_);
  held_ = false;
  const double held = absl::ToDoubleSeconds(absl::Now() - entered_);
  if (last_ == WritePriority::kUrgent) {
    counts_.urgent_held_seconds += held;
  } else {
    counts_.background_held_seconds += held;
    counts_.longest_background_seconds = std::max(counts_.longest_background_seconds, held);
  }
}

WriteGate::Counts WriteGate::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

bool WriteGate::held() const {
  absl::MutexLock lock(&mu_);
  return held_;
}

int WriteGate::waiting(WritePriority priority) const {
  absl::MutexLock lock(&mu_);
  return priority == WritePriority::kUrgent ? urgent_waiting_ : background_waiting_;
}

}  // namespace spintune
