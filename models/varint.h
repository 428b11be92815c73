// LEB128 varints for the byte encodings of models/histogram_encoding.h and
// storage/ (histogram and delta blobs).
#ifndef SPINTUNE_MODELS_VARINT_H_
#define SPINTUNE_MODELS_VARINT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace spintune {

inline void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Bytes PutVarint(v) appends.
inline size_t VarintBytes(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// False for a truncated or over-long varint; consumes what it read.
inline bool GetVarint(absl::string_view* in, uint64_t* v) {
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

}  // namespace spintune

#endif  // SPINTUNE_MODELS_VARINT_H_
