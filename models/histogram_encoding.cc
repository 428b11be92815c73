#include "models/histogram_encoding.h"

#include "absl/strings/str_cat.h"
#include "models/varint.h"

namespace spintune {

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

HistogramReader::Step HistogramReader::SlowStep(const char* pos, const char* end, int version,
                                                int64_t index) {
  absl::string_view rest(pos, static_cast<size_t>(end - pos));
  uint64_t gap = 0, n = 0;
  // Version 2: a byte (gap - 1) << 4 | count, or 0 and the varints.
  const uint8_t pair = version == 2 ? static_cast<uint8_t>(rest[0]) : 0;
  if (version == 2) rest.remove_prefix(1);
  if (pair != 0) {
    gap = (pair >> 4) + 1;
    n = pair & 0x0F;
  } else if (!GetVarint(&rest, &gap) || !GetVarint(&rest, &n)) {
    return {pos, index, 0, "truncated"};
  }
  if (gap == 0 || gap > LatencyHistogram::kBucketCount ||
      index + static_cast<int64_t>(gap) >= LatencyHistogram::kBucketCount) {
    return {pos, index, 0, "bucket out of range"};
  }
  if (n == 0) return {pos, index, 0, "count of 0"};
  return {rest.data(), index + static_cast<int64_t>(gap), n, nullptr};
}

absl::Status HistogramReader::Error(const char* why, int bad_version) {
  return absl::DataLossError(bad_version >= 0 ? absl::StrCat(why, " ", bad_version) : why);
}

}  // namespace spintune
