#include "storage/histogram_codec.h"

#include "absl/strings/str_cat.h"
#include "storage/varint.h"

namespace spintune {

std::string EncodeHistogram(const LatencyHistogram& h) {
  std::string out;
  out.reserve(EncodedHistogramBytes(h));
  AppendHistogram(&out, h);
  return out;
}

void AppendHistogram(std::string* out, const LatencyHistogram& h) {
  HistogramEncoder encoder(out);
  for (const auto& [index, count] : h.buckets()) encoder.Add(index, count);
}

HistogramEncoder::HistogramEncoder(std::string* out) : out_(out) { out_->push_back('\x01'); }

void HistogramEncoder::Add(int index, uint64_t count) {
  PutVarint(out_, static_cast<uint64_t>(index - previous_));
  PutVarint(out_, count);
  previous_ = index;
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
  LatencyHistogram h;
  if (bytes.empty()) return h;
  if (bytes[0] != '\x01') {
    return absl::DataLossError(
        absl::StrCat("histogram blob has unknown version ", static_cast<int>(bytes[0])));
  }
  bytes.remove_prefix(1);
  int64_t index = -1;
  while (!bytes.empty()) {
    uint64_t gap = 0, count = 0;
    if (!GetVarint(&bytes, &gap) || !GetVarint(&bytes, &count)) {
      return absl::DataLossError("histogram blob truncated");
    }
    if (gap == 0 || gap > LatencyHistogram::kBucketCount ||
        index + static_cast<int64_t>(gap) >= LatencyHistogram::kBucketCount) {
      return absl::DataLossError("histogram blob bucket out of range");
    }
    if (count == 0 || h.total_count() + count < h.total_count()) {
      return absl::DataLossError("histogram blob count invalid");
    }
    index += static_cast<int64_t>(gap);
    h.AddToBucket(static_cast<int>(index), count);
  }
  return h;
}

}  // namespace spintune
