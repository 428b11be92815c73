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

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.buckets_.empty()) return;
  if (&other == this) {
    for (auto& bucket : buckets_) bucket.second *= 2;
    total_count_ *= 2;
    return;
  }
  total_count_ += other.total_count_;
  // How many of other's buckets this one lacks...
  size_t missing = 0;
  auto a = buckets_.begin();
  for (const auto& b : other.buckets_) {
    while (a != buckets_.end() && a->first < b.first) ++a;
    if (a != buckets_.end() && a->first == b.first) {
      ++a;
    } else {
      ++missing;
    }
  }
  // ...then merged in place from the back: nothing is allocated unless the
  // vector must grow (compaction and fits merge many histograms of the
  // same shape; a new vector per merge was a tenth of the compactor's time).
  size_t i = buckets_.size(), j = other.buckets_.size();
  size_t out = i + missing;
  buckets_.resize(out);
  while (j > 0) {
    const auto& b = other.buckets_[j - 1];
    if (i > 0 && buckets_[i - 1].first > b.first) {
      buckets_[--out] = buckets_[--i];
    } else if (i > 0 && buckets_[i - 1].first == b.first) {
      buckets_[--out] = {b.first, buckets_[--i].second + b.second};
      --j;
    } else {
      buckets_[--out] = b;
      --j;
    }
  }
  // The i buckets left are where they belong (out == i).
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
