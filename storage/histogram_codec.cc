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
  out->push_back('\x01');
  int previous = -1;
  for (const auto& [index, count] : h.buckets()) {
    PutVarint(out, static_cast<uint64_t>(index - previous));
    PutVarint(out, count);
    previous = index;
  }
}

namespace {

// Writes v as a varint at `p`; returns the end.
char* WriteVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

}  // namespace

HistogramEncoder::HistogramEncoder(std::string* out) : out_(out) { buffer_[used_++] = '\x02'; }

HistogramEncoder::~HistogramEncoder() { Flush(); }

void HistogramEncoder::Add(int index, uint64_t count) {
  // Room for the longest: an escape byte and two varints.
  if (used_ + 1 + 2 * 10 > sizeof(buffer_)) Flush();
  const uint64_t gap = static_cast<uint64_t>(index - previous_);
  previous_ = index;
  if (gap <= 16 && count <= 15) {
    buffer_[used_++] = static_cast<char>(((gap - 1) << 4) | count);
    return;
  }
  char* p = buffer_ + used_;
  *p++ = '\0';
  p = WriteVarint(p, gap);
  p = WriteVarint(p, count);
  used_ = static_cast<size_t>(p - buffer_);
}

void HistogramEncoder::Flush() {
  out_->append(buffer_, used_);
  used_ = 0;
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
  if (bytes[0] != '\x01' && bytes[0] != '\x02') {
    return absl::DataLossError(
        absl::StrCat("histogram blob has unknown version ", static_cast<int>(bytes[0])));
  }
  const bool packed = bytes[0] == '\x02';
  bytes.remove_prefix(1);
  // At most a bucket per byte (version 2) or per two (version 1): one
  // allocation instead of the vector's doublings.
  h.Reserve(packed ? bytes.size() : bytes.size() / 2);
  int64_t index = -1;
  while (!bytes.empty()) {
    uint64_t gap = 0, count = 0;
    // Version 2: a byte (gap - 1) << 4 | count, or 0 and the varints.
    const uint8_t pair = packed ? static_cast<uint8_t>(bytes[0]) : 0;
    if (packed) bytes.remove_prefix(1);
    if (pair != 0) {
      gap = (pair >> 4) + 1;
      count = pair & 0x0F;
    } else if (!GetVarint(&bytes, &gap) || !GetVarint(&bytes, &count)) {
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
