// Byte encoding of a LatencyHistogram for SQLite BLOB columns
// (storage/SCHEMA.md): a version byte (1), then for each non-empty bucket in
// increasing order the varint gap to the previous bucket index and the
// varint count. Version 2 (HistogramEncoder, for staged deltas) packs
// small gaps and counts into one byte. DecodeHistogram reads both.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_STORAGE_HISTOGRAM_CODEC_H_
#define SPINTUNE_STORAGE_HISTOGRAM_CODEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "models/latency_histogram.h"

namespace spintune {

std::string EncodeHistogram(const LatencyHistogram& histogram);
// Appends EncodeHistogram(histogram) to `out` without a copy of its own.
void AppendHistogram(std::string* out, const LatencyHistogram& histogram);
// EncodeHistogram(histogram).size(), without encoding it.
size_t EncodedHistogramBytes(const LatencyHistogram& histogram);
// Writes version 2 of the encoding bucket by bucket, without a
// LatencyHistogram (the tuner encodes an agent's histogram delta for staging
// as it checks it): each bucket whose gap is at most 16 and whose count is
// at most 15 in one byte, (gap - 1) << 4 | count; any other as a byte 0 and
// the two varints of version 1. A delta's buckets (gaps and counts mostly
// small) take about half the bytes of version 1.
class HistogramEncoder {
 public:
  // Appends the version byte to `out`, which must outlive the encoder.
  explicit HistogramEncoder(std::string* out);
  // Flushes: the encoding is in `out` once the encoder is gone.
  ~HistogramEncoder();
  HistogramEncoder(const HistogramEncoder&) = delete;
  HistogramEncoder& operator=(const HistogramEncoder&) = delete;
  // REQUIRES: index above the previous one's and < kBucketCount; count >= 1.
  void Add(int index, uint64_t count);

 private:
  void Flush();

  std::string* out_;
  int previous_ = -1;
  char buffer_[256];  // written through, appended to out_ when nearly full
  size_t used_ = 0;
};

// DataLoss for malformed bytes (bad version, truncated varint, bucket out of
// range, count overflow).
absl::StatusOr<LatencyHistogram> DecodeHistogram(absl::string_view bytes);

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_HISTOGRAM_CODEC_H_
