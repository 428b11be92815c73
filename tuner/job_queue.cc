#include "tuner/job_queue.h"

namespace spintune {

void JobQueue::Push(TunerJob job) {
  absl::MutexLock lock(&mu_);
  bytes_ += job.bytes;
  ++jobs_;
  if (!job.session) {
    other_.push_back(std::move(job));
  } else {
    auto& q = streams_[job.session.get()];
    if (q.empty()) ring_.push_back(job.session.get());
    q.push_back(std::move(job));
  }
}

std::vector<TunerJob> JobQueue::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopped_ || jobs_ > 0; };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (stopped_) return {};
  return NextLocked();
}

std::vector<TunerJob> JobQueue::NextLocked() {
  std::vector<TunerJob> unit;
  auto take = [&](std::deque<TunerJob>& q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bytes_ -= q.front().bytes;
    --jobs_;
    unit.push_back(std::move(q.front()));
    q.pop_front();
  };
  const bool other_first = other_turn_ || ring_.empty();
  other_turn_ = !other_turn_;
  if (other_first && !other_.empty()) {
    take(other_);
    return unit;
  }
  uint64_t bytes = 0;
  const size_t turns = ring_.size();
  for (size_t t = 0; t < turns; ++t) {
    const SessionHandle* s = ring_.front();
    auto& q = streams_[s];
    if (!q.front().is_batch()) {
      if (!unit.empty()) break;  // its turn comes next
      take(q);
    } else {
      for (size_t n = 0; n < kQuantum && !q.empty() && q.front().is_batch() &&
                         unit.size() < kMaxGroupBatches && bytes < kMaxGroupBytes;
           ++n) {
        bytes += q.front().bytes;
        take(q);
      }
    }
    ring_.pop_front();
    if (q.empty()) {
      streams_.erase(s);
    } else {
      ring_.push_back(s);
    }
    if (!unit.back().is_batch() || unit.size() >= kMaxGroupBatches ||
        bytes >= kMaxGroupBytes) {
      break;
    }
  }
  if (unit.empty() && !other_.empty()) take(other_);
  return unit;
}

void JobQueue::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

std::vector<TunerJob> JobQueue::TakeAll() {
  absl::MutexLock lock(&mu_);
  std::vector<TunerJob> all;
  for (auto& j : other_) all.push_back(std::move(j));
  for (auto& [s, q] : streams_) {
    for (auto& j : q) all.push_back(std::move(j));
  }
  other_.clear();
  streams_.clear();
  ring_.clear();
  bytes_ = 0;
  jobs_ = 0;
  return all;
}

bool JobQueue::stopped() const {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

uint64_t JobQueue::queued_bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

size_t JobQueue::queued_jobs() const {
  absl::MutexLock lock(&mu_);
  return jobs_;
}

}  // namespace spintune
