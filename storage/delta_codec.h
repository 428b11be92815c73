// Byte encoding of a BatchDelta (what one batch adds: per key a histogram
// delta and counters, per (CPU class, device) dispatch histograms) for the
// pending_deltas table (storage/SCHEMA.md): version byte 2 (1 is still read:
// no arms); varint key
// count, then per key: cpu class and device (varint length + bytes), varint
// opcode, size class, errors, irq_timeouts, spin_timeouts, irq_path,
// spin_path, and the histogram (varint length + storage/histogram_codec);
// varint dispatch count, then per record: cpu class, device, handler and
// wake histograms; varint outcome count, then per outcome: the key (as
// above), varint version, arm (version 2; 0 table, 1 incumbent) and
// requests and five little-endian doubles (the
// CostMoments sums); varint timer count, then per record: cpu class and
// oversleep histogram; varint completion and dispatch sample counts.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_STORAGE_DELTA_CODEC_H_
#define SPINTUNE_STORAGE_DELTA_CODEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/store.h"

namespace spintune {

std::string EncodeBatchDelta(const BatchDelta& delta);

// Key histograms already encoded (storage/histogram_codec.h), one per key of
// a BatchDelta in its order: key i's bytes end at ends[i] and start where
// key i - 1's end (0 for the first).
struct EncodedKeyHistograms {
  std::string bytes;
  std::vector<size_t> ends;
};
// EncodeBatchDelta(delta) with each key's histogram taken from
// `key_histograms` instead of delta.keys[i].histogram.
// REQUIRES: key_histograms.ends.size() == delta.keys.size().
std::string EncodeBatchDelta(const BatchDelta& delta, const EncodedKeyHistograms& key_histograms);
// DataLoss for malformed bytes. The seq is not encoded (0 in the result).
absl::StatusOr<BatchDelta> DecodeBatchDelta(absl::string_view bytes);

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_DELTA_CODEC_H_
