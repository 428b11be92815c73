// BatchSpool: the agent's batches that the tuner has not acknowledged, on
// disk, one file per batch (DIR/<seq, 20 digits>.batch, written atomically),
// so that an outage or an agent restart loses nothing. Bounded: when a new
// batch would take it over max_bytes the oldest batches are dropped, and
// what was dropped is counted in DIR/dropped (kept across restarts) until
// the tuner has been told (ClearDropped).
//
// Thread-compatible: the agent calls it under its own lock.
#ifndef SPINTUNE_AGENT_BATCH_SPOOL_H_
#define SPINTUNE_AGENT_BATCH_SPOOL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "spintune/v1/spintune.pb.h"

namespace spintune {

struct SpoolDropped {
  uint64_t batches = 0;
  uint64_t samples = 0;
};

class BatchSpool {
 public:
  // Creates `dir` if needed and indexes what it holds. Unreadable batch
  // files (a crash mid-write leaves only *.tmp files, which are removed) are
  // removed and counted as dropped. InvalidArgument for max_bytes 0.
  static absl::StatusOr<std::unique_ptr<BatchSpool>> Open(const std::string& dir,
                                                          uint64_t max_bytes);

  // The spooled batches, oldest first.
  absl::StatusOr<std::vector<v1::SampleBatch>> LoadAll() const;
  // Spools `batch` (its seq must be above every spooled one). To make room
  // it drops the oldest batches with seq >= `droppable_from` (older ones are
  // in flight and may still be acknowledged; the spool then runs over its
  // limit by at most those). Returns the seqs dropped, oldest first.
  // Unavailable when the write fails (the caller keeps the batch in memory).
  absl::StatusOr<std::vector<uint64_t>> Append(const v1::SampleBatch& batch,
                                               uint64_t droppable_from = 0);
  // The tuner has every batch up to `seq`.
  void AckThrough(uint64_t seq);
  // A batch the tuner refused for its content: never resent.
  void Remove(uint64_t seq);

  uint64_t bytes() const { return bytes_; }
  size_t count() const { return index_.size(); }
  uint64_t max_seq() const { return index_.empty() ? 0 : index_.rbegin()->first; }
  const SpoolDropped& dropped() const { return dropped_; }
  // The tuner has recorded dropped(): reset it.
  void ClearDropped();

 private:
  struct Entry {
    uint64_t bytes;
    uint64_t samples;
  };
  BatchSpool(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  std::string PathOf(uint64_t seq) const;
  void Erase(uint64_t seq);
  void SaveDropped();

  std::string dir_;
  uint64_t max_bytes_;
  std::map<uint64_t, Entry> index_;
  uint64_t bytes_ = 0;
  SpoolDropped dropped_;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_BATCH_SPOOL_H_
