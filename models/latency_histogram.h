// LatencyHistogram: a mergeable log-linear histogram of durations in ns.
//
// Representation: values 0..255 ns each have their own bucket; above that,
// every power of two [2^e, 2^(e+1)) is split into 128 equal buckets. A
// bucket's width is therefore at most 1/128 of its lower bound, so any value
// is within 0.4% of its bucket's midpoint and within 0.8% of either bound
// (the product needs <= 1%). The range is 0 .. kMaxValueNs (2^42 - 1 ns,
// about 73 minutes); larger values are clamped into the last bucket.
//
// Storage is sparse (sorted (bucket, count) pairs), so a key whose samples
// span a few octaves costs a few KiB, and Merge() is a linear merge. Hot
// paths record into a LatencyRecorder (latency_recorder.h), dense, and flush
// it into this form.
//
// Thread-safety: const methods may be called concurrently; anything else
// needs external synchronization.
#ifndef SPINTUNE_MODELS_LATENCY_HISTOGRAM_H_
#define SPINTUNE_MODELS_LATENCY_HISTOGRAM_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace spintune {

class LatencyHistogram {
 public:
  static constexpr int kLinearBuckets = 256;
  static constexpr int kSubBucketsPerOctave = 128;
  static constexpr int kMaxExponent = 42;
  static constexpr uint64_t kMaxValueNs = (uint64_t{1} << kMaxExponent) - 1;
  static constexpr int kBucketCount =
      kLinearBuckets + (kMaxExponent - 8) * kSubBucketsPerOctave;

  // Bucket of `value_ns` (values above kMaxValueNs map to the last bucket).
  // Bit arithmetic only, no branch: with e = floor(log2(v | 128)) (>= 7),
  // bucket = 128 (e - 7) + (v >> (e - 7)), which is v itself below 256 and
  // 256 + 128 (e - 8) + the 7 bits after the leading one above.
  static int BucketIndex(uint64_t value_ns) {
    const uint64_t v = value_ns < kMaxValueNs ? value_ns : kMaxValueNs;
    const int shift = 63 - __builtin_clzll(v | kSubBucketsPerOctave) - 7;
    return shift * kSubBucketsPerOctave + static_cast<int>(v >> shift);
  }
  // Smallest and largest value (inclusive) that map to bucket `index`.
  // REQUIRES: 0 <= index < kBucketCount. (Inline: checking a histogram
  // delta's sum takes both bounds of every bucket.)
  static uint64_t BucketLowerNs(int index) {
    assert(index >= 0 && index < kBucketCount);
    if (index < kLinearBuckets) return static_cast<uint64_t>(index);
    const int rel = index - kLinearBuckets;
    const uint64_t mantissa = kSubBucketsPerOctave + rel % kSubBucketsPerOctave;
    return mantissa << (1 + rel / kSubBucketsPerOctave);  // exponent 8 + rel / 128, less 7
  }
  static uint64_t BucketUpperNs(int index) {
    assert(index >= 0 && index < kBucketCount);
    if (index < kLinearBuckets) return static_cast<uint64_t>(index);
    const int rel = index - kLinearBuckets;
    return BucketLowerNs(index) + (uint64_t{1} << (1 + rel / kSubBucketsPerOctave)) - 1;
  }
  // Midpoint of the bucket: the value that stands for its samples.
  static double BucketMidNs(int index);

  // Adds `count` samples of `value_ns`.
  void Record(uint64_t value_ns, uint64_t count = 1);
  // Adds `count` samples to bucket `index`. REQUIRES: valid index.
  void AddToBucket(int index, uint64_t count);
  // Adds every sample of `other`.
  void Merge(const LatencyHistogram& other);
  // The histogram of `buckets`: (index, count) pairs, indexes valid and
  // strictly increasing, counts >= 1 (checked in debug builds only), whose
  // counts add up to `total_count`. No copy of the pairs.
  static LatencyHistogram FromSortedBuckets(std::vector<std::pair<int, uint64_t>> buckets,
                                            uint64_t total_count);
  void Clear() { buckets_.clear(); total_count_ = 0; }
  // Room for `buckets` non-empty buckets without reallocating.
  void Reserve(size_t buckets) { buckets_.reserve(buckets); }

  uint64_t total_count() const { return total_count_; }
  bool empty() const { return total_count_ == 0; }
  // Non-empty buckets as (index, count), sorted by index.
  const std::vector<std::pair<int, uint64_t>>& buckets() const {
    return buckets_;
  }

  // Mean of the bucket midpoints, weighted by count. 0 when empty.
  double MeanNs() const;
  // Midpoint of the bucket holding the q-quantile (0 <= q <= 1), using the
  // nearest-rank definition. 0 when empty.
  double QuantileNs(double q) const;

  friend bool operator==(const LatencyHistogram& a, const LatencyHistogram& b) {
    return a.buckets_ == b.buckets_;
  }
  friend bool operator!=(const LatencyHistogram& a, const LatencyHistogram& b) {
    return !(a == b);
  }

 private:
  std::vector<std::pair<int, uint64_t>> buckets_;
  uint64_t total_count_ = 0;
};

}  // namespace spintune

#endif  // SPINTUNE_MODELS_LATENCY_HISTOGRAM_H_
