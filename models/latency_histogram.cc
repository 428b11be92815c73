#include "models/latency_histogram.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace spintune {

double LatencyHistogram::BucketMidNs(int index) {
  return 0.5 * (static_cast<double>(BucketLowerNs(index)) +
                static_cast<double>(BucketUpperNs(index)));
}

void LatencyHistogram::Record(uint64_t value_ns, uint64_t count) {
  AddToBucket(BucketIndex(value_ns), count);
}

void LatencyHistogram::AddToBucket(int index, uint64_t count) {
  assert(index >= 0 && index < kBucketCount);
  if (count == 0) return;
  total_count_ += count;
  // Samples usually land in recently used buckets; try the back first.
  if (buckets_.empty() || buckets_.back().first < index) {
    buckets_.emplace_back(index, count);
    return;
  }
  auto it = std::lower_bound(
      buckets_.begin(), buckets_.end(), index,
      [](const std::pair<int, uint64_t>& b, int i) { return b.first < i; });
  if (it != buckets_.end() && it->first == index) {
    it->second += count;
  } else {
    buckets_.insert(it, {index, count});
  }
}

LatencyHistogram LatencyHistogram::FromSortedBuckets(std::vector<std::pair<int, uint64_t>> buckets,
                                                     uint64_t total_count) {
#ifndef NDEBUG
  uint64_t sum = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    assert(buckets[i].first >= 0 && buckets[i].first < kBucketCount && buckets[i].second >= 1);
    assert(i == 0 || buckets[i - 1].first < buckets[i].first);
    sum += buckets[i].second;
  }
  assert(sum == total_count);
#endif
  LatencyHistogram h;
  h.buckets_ = std::move(buckets);
  h.total_count_ = total_count;
  return h;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.buckets_.empty()) return;
  std::vector<std::pair<int, uint64_t>> merged;
  merged.reserve(buckets_.size() + other.buckets_.size());
  auto a = buckets_.begin();
  auto b = other.buckets_.begin();
  while (a != buckets_.end() || b != other.buckets_.end()) {
    if (b == other.buckets_.end() || (a != buckets_.end() && a->first < b->first)) {
      merged.push_back(*a++);
    } else if (a == buckets_.end() || b->first < a->first) {
      merged.push_back(*b++);
    } else {
      merged.emplace_back(a->first, a->second + b->second);
      ++a;
      ++b;
    }
  }
  buckets_ = std::move(merged);
  total_count_ += other.total_count_;
}

double LatencyHistogram::MeanNs() const {
  if (total_count_ == 0) return 0.0;
  double sum = 0.0;
  for (const auto& [index, count] : buckets_) {
    sum += BucketMidNs(index) * static_cast<double>(count);
  }
  return sum / static_cast<double>(total_count_);
}

double LatencyHistogram::QuantileNs(double q) const {
  if (total_count_ == 0) return 0.0;
  q = std::clamp(q, 0.0, 1.0);
  // Nearest rank: the smallest value with at least ceil(q * n) samples <= it.
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total_count_)));
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (const auto& [index, count] : buckets_) {
    seen += count;
    if (seen >= rank) return BucketMidNs(index);
  }
  return BucketMidNs(buckets_.back().first);
}

}  // namespace spintune
