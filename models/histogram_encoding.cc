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

HistogramReader::HistogramReader(absl::string_view bytes)
    : pos_(bytes.data()), end_(bytes.data() + bytes.size()) {
  if (pos_ == end_) return;
  if (*pos_ != '\x01' && *pos_ != '\x02') {
    Fail(absl::StrCat("unknown version ", static_cast<int>(static_cast<uint8_t>(*pos_))));
    return;
  }
  version_ = *pos_++;
}

bool HistogramReader::Fail(absl::string_view why) {
  status_ = absl::DataLossError(why);
  pos_ = end_;
  return false;
}

bool HistogramReader::NextSlow(int* index, uint64_t* count) {
  if (pos_ == end_) return false;
  absl::string_view rest(pos_, static_cast<size_t>(end_ - pos_));
  uint64_t gap = 0, n = 0;
  // Version 2: a byte (gap - 1) << 4 | count, or 0 and the varints.
  const uint8_t pair = version_ == 2 ? static_cast<uint8_t>(rest[0]) : 0;
  if (version_ == 2) rest.remove_prefix(1);
  if (pair != 0) {
    gap = (pair >> 4) + 1;
    n = pair & 0x0F;
  } else if (!GetVarint(&rest, &gap) || !GetVarint(&rest, &n)) {
    return Fail("truncated");
  }
  if (gap == 0 || gap > LatencyHistogram::kBucketCount ||
      index_ + static_cast<int64_t>(gap) >= LatencyHistogram::kBucketCount) {
    return Fail("bucket out of range");
  }
  if (n == 0) return Fail("count of 0");
  pos_ = rest.data();
  index_ += static_cast<int64_t>(gap);
  *index = static_cast<int>(index_);
  *count = n;
  return true;
}

}  // namespace spintune
