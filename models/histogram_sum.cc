#include "models/histogram_sum.h"

namespace spintune {

void HistogramSum::Add(const LatencyHistogram& histogram) {
  for (const auto& [index, count] : histogram.buckets()) {
    uint64_t& word = non_empty_[index >> 6];
    const uint64_t bit = uint64_t{1} << (index & 63);
    buckets_ += (word & bit) == 0;
    word |= bit;
    counts_[index] += count;
  }
  total_count_ += histogram.total_count();
}

LatencyHistogram HistogramSum::Take() {
  if (buckets_ == 0) return LatencyHistogram();
  std::vector<std::pair<int, uint64_t>> buckets;
  buckets.reserve(buckets_);
  for (int w = 0; w < kWords; ++w) {
    for (uint64_t bits = non_empty_[w]; bits != 0; bits &= bits - 1) {
      const int index = w * 64 + __builtin_ctzll(bits);
      buckets.emplace_back(index, counts_[index]);  // in increasing order
      counts_[index] = 0;
    }
    non_empty_[w] = 0;
  }
  const uint64_t total = total_count_;
  total_count_ = 0;
  buckets_ = 0;
  return LatencyHistogram::FromSortedBuckets(std::move(buckets), total);
}

}  // namespace spintune
