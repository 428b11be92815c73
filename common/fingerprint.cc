#include "common/fingerprint.h"

#include "absl/base/internal/endian.h"

namespace spintune {
namespace {

// The finaliser of MurmurHash3 / SplitMix64: every input bit affects every
// output bit.
uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

}  // namespace

uint64_t Fingerprint64(absl::string_view bytes) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  uint64_t h = Mix(bytes.size() ^ kMul);
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    h = Mix(h ^ absl::little_endian::Load64(bytes.data() + i)) * kMul;
  }
  uint64_t tail = 0;
  for (size_t j = bytes.size(); j > i; --j) {
    tail = (tail << 8) | static_cast<unsigned char>(bytes[j - 1]);
  }
  return Mix(h ^ tail ^ (static_cast<uint64_t>(bytes.size() - i) << 56));
}

}  // namespace spintune
