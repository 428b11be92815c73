#include "storage/histogram_codec.h"

#include "absl/strings/str_cat.h"
#include "models/varint.h"

namespace spintune {

std::string EncodeHistogram(const LatencyHistogram& h) {
  std::string out;
  out.reserve(EncodedHistogramBytes(h));
  AppendHistogram(&out, h);
  return out;
}

void AppendHistogram(std::string* out, const LatencyHistogram& h) {
  out->push_back('\x01');
  int previous = -1;
  for (const auto& [index, count] : h.buckets()) {
    PutVarint(out, static_cast<uint64_t>(index - previous));
    PutVarint(out, count);
    previous = index;
  }
}

size_t EncodedHistogramBytes(const LatencyHistogram& h) {
  size_t bytes = 1;
  int previous = -1;
  for (const auto& [index, count] : h.buckets()) {
    bytes += VarintBytes(static_cast<uint64_t>(index - previous)) + VarintBytes(count);
    previous = index;
  }
  return bytes;
}

absl::StatusOr<LatencyHistogram> DecodeHistogram(absl::string_view bytes) {
  HistogramReader reader(bytes);
  // At most a bucket per byte (version 2) or per two (version 1): one
  // allocation instead of the vector's doublings. The reader yields
  // buckets in strictly increasing order with counts >= 1, so the pairs
  // are the histogram as they are.
  std::vector<std::pair<int, uint64_t>> buckets;
  buckets.reserve(reader.version() == 2 ? bytes.size() : bytes.size() / 2);
  uint64_t total = 0;
  int index = 0;
  uint64_t count = 0;
  while (reader.Next(&index, &count)) {
    if (total + count < total) return absl::DataLossError("histogram blob count invalid");
    total += count;
    buckets.emplace_back(index, count);
  }
  if (!reader.status().ok()) {
    return absl::DataLossError(absl::StrCat("histogram blob ", reader.status().message()));
  }
  return LatencyHistogram::FromSortedBuckets(std::move(buckets), total);
}

}  // namespace spintune
