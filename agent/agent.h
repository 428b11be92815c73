// Agent: streams a SampleSource's measurements to the tuner over one gRPC
// Session at a time, applies pushed policy tables through a PolicySink, and
// acknowledges them.
//
// Delivery: batches carry sequence numbers 1, 2, ... with no gap; for a
// deterministic source (sim, csv, replay) seq N is always the source's Nth
// batch, across restarts. At most max_unacked_batches are in flight; a batch
// leaves the agent only when the tuner acknowledges it (after it is
// durable). Unacknowledged batches are kept in a bounded on-disk spool
// (spool_dir), so neither an outage nor an agent restart loses them; a full
// spool replaces the oldest unsent batches by placeholders that keep their
// seqs, so the tuner counts exactly what was dropped. When the stream breaks
// the agent reconnects with exponential backoff, learns the tuner's last
// durable seq from HelloAck and resends everything it still holds (the
// tuner acknowledges what it already has as duplicates, after checking the
// content is the same). After a session that ended because the tuner
// deferred a batch (Rejected with retry: its storage failing, a rate limit)
// the agent waits the whole backoff (the channel is ready all along), and
// the backoff keeps doubling unless that session had a batch acknowledged:
// a tuner that stores nothing is not asked again at once. A restarted deterministic source skips the batches
// its spool holds or had acknowledged; a live source numbers new batches
// after its spool's last seq, or, without a spool history, after the
// tuner's last durable seq.
//
// Run() returns DataLoss when batches were refused by the tuner for good or
// dropped from a full spool (the message counts both).
//
// Thread-safety: Run() once from one thread; Stop() from any thread.
#ifndef SPINTUNE_AGENT_AGENT_H_
#define SPINTUNE_AGENT_AGENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/policy_sink.h"
#include "agent/sample_source.h"
#include "models/latency_histogram.h"
#include "policy/policy_bounds.h"
#include "proto/channel_security.h"

namespace spintune {

class KnobController;

struct AgentOptions {
  // host:port, or a comma-separated list of them: after a failed session
  // the agent moves on to the next (round robin). The tuners of a list must
  // share one database (its durable seqs are what makes a resend exactly
  // once).
  std::string tuner_address;
  ClientSecurity security;        // TLS files and bearer token
  std::string agent_id;           // stable identity; REQUIRES: non-empty
  uint64_t max_samples = 0;       // stop after this many completions (0: never)
  size_t batch_size = 512;        // completions per batch
  size_t max_unacked_batches = 16;
  // Pace the source to this many completions per second (0: as fast as the
  // tuner acknowledges). Simulated sources use it to look like a live board.
  double samples_per_second = 0;
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  // Give up when no session could be established for this long (0: never).
  // A tuner that answers "retry later" (its storage fails) counts as a
  // session here: the agent backs off and keeps trying it.
  absl::Duration give_up_after = absl::ZeroDuration();
  // How long to wait for the tuner's final table after the last batch.
  absl::Duration drain_timeout = absl::Seconds(60);
  // Optional CSV of every completion sample, written once per batch.
  std::string record_csv;
  // Where the last table that was applied successfully is kept (empty: not
  // kept). At start the agent re-applies it through the sink before it
  // connects, so a rebooted board runs its tuned table without the tuner.
  std::string state_dir;
  // Unacknowledged batches on disk (empty: in memory only, lost with the
  // process), at most spool_max_bytes.
  std::string spool_dir;
  uint64_t spool_max_bytes = 64ull << 20;
  // What this board allows a pushed table to ask for; a table beyond it is
  // refused (reported to the tuner) and the last good table stays.
  PolicyBounds bounds;
  // Knobs to experiment with (agent/knobs/knob_controller.h): declared on
  // every session; the agent does not finish while an experiment runs.
  std::shared_ptr<KnobController> knobs;
  // Send the IRQ handler and wake-up times the source measured; the tuner
  // prices the IRQ path by them instead of the declared platform costs.
  // false: they are dropped here and the declared costs stand (a platform
  // the driver measured itself, with no tracer slowing its wake-ups).
  bool send_dispatch = true;
  // Send histogram deltas as HistogramDelta.buckets (agent/capture/
  // histogram_batch.h: half the bytes, and the tuner stages them without
  // decoding and re-encoding) instead of bucket_index/bucket_count. A
  // tuner whose HelloAck does not accept them (older than this field) is
  // sent no batch: the agent logs an error, ends the session and tries
  // again (the next tuner of a list) after a backoff, as when a tuner
  // defers every batch (never giving up on that account).
  bool histogram_bytes = false;
};

struct AgentStats {
  // Completions drawn from the source; for a deterministic source this is
  // its position and includes the samples skipped at a restart.
  uint64_t samples_generated = 0;
  uint64_t samples_skipped = 0;  // restart: in the spool or acknowledged before
  uint64_t batches_acked = 0;
  uint64_t duplicate_acks = 0;
  // Refused by the tuner for good (content, limits, a conflicting resend):
  // their samples are not stored.
  uint64_t batches_rejected = 0;
  uint64_t samples_rejected = 0;
  uint64_t reconnects = 0;
  uint64_t applied_version = 0;
  // Pushed tables this run did not apply: refused (bounds, validation) or
  // written and failed (the sink), and the last reason.
  uint64_t tables_refused = 0;
  uint64_t table_write_failures = 0;
  std::string last_table_error;
  uint64_t tuner_total_samples = 0;  // from Drained
  uint64_t reapplied_version = 0;    // the last good table applied at start
  uint64_t restored_batches = 0;     // found in the spool at start
  // Dropped from a full spool this run (placeholders tell the tuner).
  uint64_t spool_dropped_batches = 0;
  uint64_t spool_dropped_samples = 0;
  // Batch written -> its ack received, per acknowledged batch (ns).
  LatencyHistogram ack_latency;
};

class Agent {
 public:
  Agent(AgentOptions options, std::unique_ptr<SampleSource> source,
        std::unique_ptr<PolicySink> sink);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Streams until max_samples were generated, acknowledged and the final
  // table applied, or until Stop(). Errors: InvalidArgument for bad options,
  // DeadlineExceeded when give_up_after passed without a session, the
  // source's or recorder's errors.
  absl::Status Run();
  // Asks Run() to flush what is in flight and return: it waits for the
  // acks up to drain_timeout (5 s at most with a spool, which keeps the
  // rest). A live source first hands over its interval in progress
  // (SampleSource::EndInterval), which goes out with the rest: Stop() may
  // take a source's Fill() wait (~100 ms) per batch of it. A second call
  // ends the wait: Run() returns at once. Async-signal-unsafe; call it from
  // a normal thread.
  void Stop();
  AgentStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_AGENT_H_
