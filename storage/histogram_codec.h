// Byte encoding of a LatencyHistogram for SQLite BLOB columns
// (storage/SCHEMA.md): a version byte (1), then for each non-empty bucket in
// increasing order the varint gap to the previous bucket index and the
// varint count. Version 2 (models/histogram_encoding.h's HistogramEncoder:
// staged deltas, and agents' HistogramDelta.buckets) packs small gaps and
// counts into one byte. DecodeHistogram reads both.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_STORAGE_HISTOGRAM_CODEC_H_
#define SPINTUNE_STORAGE_HISTOGRAM_CODEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "models/histogram_encoding.h"
#include "models/latency_histogram.h"

namespace spintune {

std::string EncodeHistogram(const LatencyHistogram& histogram);
// Appends EncodeHistogram(histogram) to `out` without a copy of its own.
void AppendHistogram(std::string* out, const LatencyHistogram& histogram);
// EncodeHistogram(histogram).size(), without encoding it.
size_t EncodedHistogramBytes(const LatencyHistogram& histogram);
// DataLoss for malformed bytes (bad version, truncated varint, bucket out of
// range, count overflow).
absl::StatusOr<LatencyHistogram> DecodeHistogram(absl::string_view bytes);

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_HISTOGRAM_CODEC_H_
