// The compact byte form of a LatencyHistogram's buckets
// (models/latency_histogram.h), written and read bucket by bucket without a
// LatencyHistogram: version 2 of storage/histogram_codec.h's encoding (the
// tuner's staged deltas, storage/SCHEMA.md) and the wire form
// HistogramDelta.buckets (docs/protocol.md), which the tuner stages as it
// came. A version byte 0x02, then per non-empty bucket in increasing index
// order one byte (gap - 1) << 4 | count when the gap from the previous
// index (the first counts from -1) is 1..16 and the count 1..15, else a
// byte 0x00 and the gap and count as varints. The reader also reads version
// 1 (0x01, every bucket as the two varints).
//
// Pure; an encoder or reader is used by one thread at a time.
#ifndef SPINTUNE_MODELS_HISTOGRAM_ENCODING_H_
#define SPINTUNE_MODELS_HISTOGRAM_ENCODING_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "models/latency_histogram.h"

namespace spintune {

// Writes version 2 bucket by bucket (the tuner encodes an agent's
// bucket_index/bucket_count delta for staging as it checks it; the agent
// writes HistogramDelta.buckets). A delta's buckets (gaps and counts mostly
// small) take about half the bytes of version 1.
class HistogramEncoder {
 public:
  // Appends the version byte to `out`, which must outlive the encoder.
  explicit HistogramEncoder(std::string* out);
  // Flushes: the encoding is in `out` once the encoder is gone.
  ~HistogramEncoder();
  HistogramEncoder(const HistogramEncoder&) = delete;
  HistogramEncoder& operator=(const HistogramEncoder&) = delete;
  // REQUIRES: index above the previous one's and < LatencyHistogram's
  // kBucketCount; count >= 1.
  void Add(int index, uint64_t count);

 private:
  void Flush();

  std::string* out_;
  int previous_ = -1;
  char buffer_[256];  // written through, appended to out_ when nearly full
  size_t used_ = 0;
};

// Reads an encoding (either version) bucket by bucket, without a
// LatencyHistogram: what DecodeHistogram does, for callers that check or
// sum the buckets as they go (the tuner's check of an agent's
// HistogramDelta.buckets). `bytes` must outlive the reader.
class HistogramReader {
 public:
  // Empty bytes: no buckets.
  explicit HistogramReader(absl::string_view bytes);
  // The next bucket in increasing index order: true and its index (<
  // kBucketCount) and count (>= 1); false at the end or on malformed bytes
  // (then status() says why: unknown version, truncated varint, a gap of 0,
  // a bucket beyond the last, a count of 0).
  bool Next(int* index, uint64_t* count) {
    // Inline: a version 2 byte of a small gap and count (most buckets).
    if (version_ == 2 && pos_ != end_ && (*pos_ & 0x0F) != 0) {
      const uint8_t pair = static_cast<uint8_t>(*pos_);
      const int64_t next = index_ + (pair >> 4) + 1;
      if (next < LatencyHistogram::kBucketCount) {
        ++pos_;
        index_ = next;
        *index = static_cast<int>(next);
        *count = pair & 0x0F;
        return true;
      }
    }
    return NextSlow(index, count);
  }
  // OK until Next() met malformed bytes.
  const absl::Status& status() const { return status_; }
  // The version byte read (1 or 2; 0: empty or unknown).
  int version() const { return version_; }

 private:
  // A bucket of either version in full (varints, every check).
  bool NextSlow(int* index, uint64_t* count);
  bool Fail(absl::string_view why);

  const char* pos_;
  const char* end_;
  int version_ = 0;
  int64_t index_ = -1;
  absl::Status status_;
};

}  // namespace spintune

#endif  // SPINTUNE_MODELS_HISTOGRAM_ENCODING_H_
