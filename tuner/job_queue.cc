#include "tuner/job_queue.h"

namespace spintune {
namespace {

// Emptied streams' vectors kept for reuse (each up to a stream window of
// jobs): enough for the streams a worker's group drains at once.
constexpr size_t kMaxSpareStreams = 64;

}  // namespace

void JobQueue::Push(TunerJob job) {
  absl::MutexLock lock(&mu_);
  bytes_ += job.bytes;
  ++jobs_;
  if (!job.session) {
    other_.push_back(std::move(job));
  } else {
    auto [it, added] = streams_.try_emplace(job.session.get());
    Stream& q = it->second;
    if (added) {
      ring_.push_back(job.session.get());
      if (!spare_.empty()) {
        q.jobs = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    q.jobs.push_back(std::move(job));
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
  auto take_other = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bytes_ -= other_.front().bytes;
    --jobs_;
    unit.push_back(std::move(other_.front()));
    other_.pop_front();
  };
  auto take = [&](Stream& q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bytes_ -= q.front().bytes;
    --jobs_;
    unit.push_back(std::move(q.front()));
    ++q.head;
  };
  const bool other_first = other_turn_ || ring_.empty();
  other_turn_ = !other_turn_;
  if (other_first && !other_.empty()) {
    take_other();
    return unit;
  }
  uint64_t bytes = 0;
  const size_t turns = ring_.size();
  for (size_t t = 0; t < turns; ++t) {
    const SessionHandle* s = ring_.front();
    auto it = streams_.find(s);
    Stream& q = it->second;
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
      q.jobs.clear();  // (moved from)
      if (spare_.size() < kMaxSpareStreams) spare_.push_back(std::move(q.jobs));
      streams_.erase(it);
    } else {
      if (q.head >= kQuantum && 2 * q.head >= q.jobs.size()) {  // a busy stream
        q.jobs.erase(q.jobs.begin(), q.jobs.begin() + static_cast<ptrdiff_t>(q.head));
        q.head = 0;
      }
      ring_.push_back(s);
    }
    if (!unit.back().is_batch() || unit.size() >= kMaxGroupBatches ||
        bytes >= kMaxGroupBytes) {
      break;
    }
  }
  if (unit.empty() && !other_.empty()) take_other();
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
    for (size_t i = q.head; i < q.jobs.size(); ++i) all.push_back(std::move(q.jobs[i]));
  }
  other_.clear();
  streams_.clear();
  spare_.clear();
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
