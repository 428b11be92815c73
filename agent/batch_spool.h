// BatchSpool: the agent's batches that the tuner has not acknowledged, on
// disk, one file per batch (DIR/<seq, 20 digits>.batch, written atomically),
// so that an outage or an agent restart loses nothing.
//
// Bounded: when a new batch would take it over max_bytes, the oldest batches
// that may be dropped are replaced by a placeholder (SampleBatch.dropped:
// their seq range and sample count; adjacent placeholders merge into one),
// so the sequence the tuner sees never skips a seq and the tuner counts
// exactly what was dropped.
//
// The spool also remembers the highest seq it ever held (DIR/last_seq,
// written before the batch holding it is removed), so that a restarted agent
// knows where its sequence stands even when everything was acknowledged.
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

// What Append() did to make room.
struct SpoolDrops {
  // Seqs whose batch (or placeholder) is gone from the spool.
  std::vector<uint64_t> removed;
  // Placeholders now spooled (new ones, or merged ones replacing a removed
  // seq); each stands for SampleBatch.seq .. dropped().last_seq.
  std::vector<v1::SampleBatch> placeholders;
  uint64_t batches = 0;  // batches newly dropped
  uint64_t samples = 0;  // their completion samples
};

class BatchSpool {
 public:
  // Creates `dir` if needed and indexes what it holds. Files left by a crash
  // mid-write (*.tmp.*) are removed; an unreadable batch file is replaced by
  // a placeholder (its samples unknown, counted as 0) and reported in
  // unreadable(). InvalidArgument for max_bytes 0.
  static absl::StatusOr<std::unique_ptr<BatchSpool>> Open(const std::string& dir,
                                                          uint64_t max_bytes);

  // The spooled batches and placeholders, oldest first.
  absl::StatusOr<std::vector<v1::SampleBatch>> LoadAll() const;
  // Spools `batch` (REQUIRES: its seq is above last_seq()). To make room it
  // replaces the oldest batches with seq >= `droppable_from` by placeholders
  // (older ones may already be stored by the tuner; the spool then runs over
  // its limit by at most those). Unavailable when a write fails (the caller
  // keeps the batch in memory).
  absl::StatusOr<SpoolDrops> Append(const v1::SampleBatch& batch, uint64_t droppable_from);
  // The tuner has every batch up to `seq`.
  void AckThrough(uint64_t seq);
  // A batch the tuner used up (refused): never resent.
  void Remove(uint64_t seq);
  // Renumbers every spooled batch by `delta` (a live agent that learnt where
  // the tuner's sequence stands). REQUIRES: seqs stay >= 1.
  absl::Status Shift(int64_t delta);

  uint64_t bytes() const { return bytes_; }
  size_t count() const { return index_.size(); }
  // Highest seq ever spooled (0: none).
  uint64_t last_seq() const;
  // Batch files Open() found unreadable and replaced by placeholders.
  uint64_t unreadable() const { return unreadable_; }

 private:
  struct Entry {
    uint64_t bytes;
    uint64_t samples;
    uint64_t last_seq;  // == seq but for placeholders
    bool placeholder;
  };
  BatchSpool(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  std::string PathOf(uint64_t seq) const;
  absl::Status Put(const v1::SampleBatch& batch);
  void Erase(uint64_t seq);
  // Replaces the batch `seq` by a placeholder (merged with one ending at
  // seq - 1 that is >= droppable_from).
  absl::Status Drop(uint64_t seq, uint64_t droppable_from, SpoolDrops* drops);

  std::string dir_;
  uint64_t max_bytes_;
  std::map<uint64_t, Entry> index_;
  uint64_t bytes_ = 0;
  uint64_t last_seq_floor_ = 0;  // DIR/last_seq
  uint64_t unreadable_ = 0;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_BATCH_SPOOL_H_
