#include "storage/histogram_codec.h"

#include "absl/strings/str_cat.h"

namespace spintune {
namespace {

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool GetVarint(absl::string_view* in, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift <= 63 && !in->empty(); shift += 7) {
    const uint8_t byte = static_cast<uint8_t>((*in)[0]);
    in->remove_prefix(1);
    if (shift == 63 && (byte & 0x7E)) return false;
    result |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if (!(byte & 0x80)) {
      *v = result;
      return true;
    }
  }
  return false;
}

}  // namespace

std::string EncodeHistogram(const LatencyHistogram& h) {
  std::string out(1, '\x01');
  int previous = -1;
  for (const auto& [index, count] : h.buckets()) {
    PutVarint(&out, static_cast<uint64_t>(index - previous));
    PutVarint(&out, count);
    previous = index;
  }
  return out;
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
