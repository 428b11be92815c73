// Validation of what agents send, and its conversion into storage deltas.
// The one place that checks every field of a Hello and a SampleBatch; errors
// are InvalidArgument naming the field ("completions.wait_ns[3]: ...").
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_TUNER_BATCH_DECODER_H_
#define SPINTUNE_TUNER_BATCH_DECODER_H_

#include <string>

#include "absl/status/statusor.h"
#include "spintune/v1/spintune.pb.h"
#include "storage/store.h"

namespace spintune {

// Limits on what one agent may declare or send.
inline constexpr int kMaxCpuClasses = 64;
inline constexpr int kMaxDevices = 64;
inline constexpr int kMaxCompletionsPerBatch = 65536;  // the agent's --batch-size limit
inline constexpr size_t kMaxNameBytes = 256;
inline constexpr int kMaxHistogramsPerBatch = 4096;  // keys with a histogram delta
inline constexpr uint64_t kMaxHistogramCount = uint64_t{1} << 40;  // samples in one delta

// Checks a Hello and converts it into a TargetRecord.
absl::StatusOr<TargetRecord> DecodeHello(const v1::Hello& hello);

// Checks `batch` against the session's `hello` and aggregates it into
// per-key and per-dispatch histograms: its sample columns and its histogram
// deltas (a key present in both is one KeyEvidence).
absl::StatusOr<BatchDelta> DecodeBatch(const v1::SampleBatch& batch, const v1::Hello& hello);

// A batch checked and encoded for the store's staging (what the ingest
// worker needs of it).
struct StagedBatch {
  // DecodeBatch()'s delta without its histograms (keys, counters, sample
  // counts, outcomes are kept).
  BatchDelta delta;
  // EncodeBatchDelta() of the whole delta (storage/delta_codec.h).
  std::string staged;
};
// DecodeBatch() and EncodeBatchDelta() in one: a batch of histogram deltas
// without sample columns and with each key once (what the BPF capture
// sends) is encoded as it is checked, without building its histograms.
absl::StatusOr<StagedBatch> DecodeBatchForStaging(const v1::SampleBatch& batch,
                                                  const v1::Hello& hello);

}  // namespace spintune

#endif  // SPINTUNE_TUNER_BATCH_DECODER_H_
