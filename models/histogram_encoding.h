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
// HistogramDelta.buckets). `bytes` must outlive the reader. Inline, and no
// pointer to the reader leaves it, so its state stays in registers in the
// caller's loop.
class HistogramReader {
 public:
  // Empty bytes: no buckets.
  explicit HistogramReader(absl::string_view bytes)
      : pos_(bytes.data()), end_(bytes.data() + bytes.size()) {
    if (pos_ == end_) return;
    if (*pos_ == '\x01' || *pos_ == '\x02') {
      version_ = *pos_++;
    } else {
      bad_version_ = static_cast<uint8_t>(*pos_);
      error_ = "unknown version";
      pos_ = end_;
    }
  }
  // The next bucket in increasing index order: true and its index (<
  // kBucketCount) and count (>= 1); false at the end or on malformed bytes
  // (then status() says why: unknown version, truncated varint, a gap of 0,
  // a bucket beyond the last, a count of 0).
  bool Next(int* index, uint64_t* count) {
    if (pos_ == end_) return false;
    // A version 2 byte of a small gap and count (most buckets).
    const uint8_t pair = static_cast<uint8_t>(*pos_);
    if (version_ == 2 && (pair & 0x0F) != 0 &&
        index_ + (pair >> 4) + 1 < LatencyHistogram::kBucketCount) {
      ++pos_;
      index_ += (pair >> 4) + 1;
      *index = static_cast<int>(index_);
      *count = pair & 0x0F;
      return true;
    }
    const Step step = SlowStep(pos_, end_, version_, index_);
    if (step.error != nullptr) {
      error_ = step.error;
      pos_ = end_;
      return false;
    }
    pos_ = step.pos;
    index_ = step.index;
    *index = static_cast<int>(index_);
    *count = step.count;
    return true;
  }
  // OK until Next() met malformed bytes.
  absl::Status status() const {
    return error_ == nullptr ? absl::OkStatus() : Error(error_, bad_version_);
  }
  // The version byte read (1 or 2; 0: empty or unknown).
  int version() const { return version_; }

 private:
  struct Step {
    const char* pos;
    int64_t index;
    uint64_t count;
    const char* error;  // null: a bucket
  };
  // A bucket of either version in full (varints, every check).
  static Step SlowStep(const char* pos, const char* end, int version, int64_t index);
  static absl::Status Error(const char* why, int bad_version);

  const char* pos_;
  const char* end_;
  int version_ = 0;
  int64_t index_ = -1;
  const char* error_ = nullptr;
  int bad_version_ = -1;  // the unknown version byte
};

}  // namespace spintune

#endif  // SPINTUNE_MODELS_HISTOGRAM_ENCODING_H_
