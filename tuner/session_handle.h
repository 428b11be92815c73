// SessionHandle: one agent stream as the tuner core sees it. The gRPC layer
// (tuner_service.cc) implements it; the core posts answers through it.
#ifndef SPINTUNE_TUNER_SESSION_HANDLE_H_
#define SPINTUNE_TUNER_SESSION_HANDLE_H_

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "policy/policy_table.h"
#include "spintune/v1/spintune.pb.h"

namespace spintune {

class SessionHandle {
 public:
  virtual ~SessionHandle() = default;
  // Queues a message for the agent. Thread-safe, non-blocking; dropped when
  // the stream is gone.
  virtual void Send(v1::TunerMessage message) = 0;
  // Queues a message as Send() does but may leave starting its write to a
  // later Flush() (the core's one ingest worker queues its acks; another
  // thread starts the writes). Thread-safe. Default: Send().
  virtual void Queue(v1::TunerMessage message) { Send(std::move(message)); }
  // Starts writing what Queue() left queued. Thread-safe. Default: nothing.
  virtual void Flush() {}
  // Ends the stream with `status` after queued messages are written.
  virtual void Fail(absl::Status status) = 0;
  // False once the stream is finishing or gone: its batches can no longer be
  // acknowledged (the agent resends them). Thread-safe.
  virtual bool open() const = 0;
  // The core has room again for what this stream sends (see
  // TunerCore::AdmitRead). Thread-safe.
  virtual void ResumeReading() = 0;

  // When the stream was opened, and whether a Hello arrived (streams that
  // never say hello are ended after TunerOptions::hello_timeout).
  const absl::Time opened_at = absl::Now();
  std::atomic<bool> hello_seen{false};
  // Seqs up to this may be resends of batches stored before this session
  // (whose fingerprints may be of version 1, storage/store.h): the last
  // durable seq its Hello was answered with (until then, every seq).
  std::atomic<uint64_t> resend_bound{UINT64_MAX};

  // Written and read only on the core's worker thread.
  int64_t target_id = 0;
  v1::Hello hello;
  // Set when a batch could not be stored (storage failing, rate limit, a seq
  // out of order): every later batch of this stream is refused too (retry),
  // so the agent reconnects and resends in order.
  bool stalled = false;
  // The keys of the last batch all of whose keys the target had
  // (TunerCore::CheckKeyLimit).
  std::vector<PolicyKey> known_batch_keys;
};

}  // namespace spintune

#endif  // SPINTUNE_TUNER_SESSION_HANDLE_H_
