// TraceBatcher: moves the correlator's completion and dispatch events into
// the columns of a SampleBatch, for the fixed device list of the agent's
// hello. Events of devices not in the list, and dispatch samples of IRQs not
// attributed to one, are dropped and counted. Every sample is reported in
// CPU class 0 (trace sources describe one class).
//
// Thread-compatible.
#ifndef SPINTUNE_AGENT_TRACE_TRACE_BATCHER_H_
#define SPINTUNE_AGENT_TRACE_TRACE_BATCHER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "agent/trace/trace_correlator.h"
#include "spintune/v1/spintune.pb.h"

namespace spintune {

class TraceBatcher {
 public:
  // `devices` in hello order: the index of a name is its device_index.
  explicit TraceBatcher(const std::vector<std::string>& devices);

  // Moves up to `max_completions` completions, and every dispatch sample
  // waiting, from the queues into `batch`. Returns the completions appended.
  size_t Drain(std::deque<CompletionEvent>* completions, std::deque<DispatchEvent>* dispatches,
               size_t max_completions, v1::SampleBatch* batch);

  uint64_t dropped_completions() const { return dropped_completions_; }
  uint64_t dropped_dispatches() const { return dropped_dispatches_; }

 private:
  std::map<std::string, uint32_t> index_;
  uint64_t dropped_completions_ = 0;
  uint64_t dropped_dispatches_ = 0;
};

v1::WaitPath ToWaitPath(TracePath path);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_TRACE_TRACE_BATCHER_H_
