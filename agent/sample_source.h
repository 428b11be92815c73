// SampleSource: where an agent's measurements come from (a simulated board,
// later live tracefs and trace replay). Internal to agent/.
//
// Thread-safety: a source is used by one thread.
#ifndef SPINTUNE_AGENT_SAMPLE_SOURCE_H_
#define SPINTUNE_AGENT_SAMPLE_SOURCE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "spintune/v1/spintune.pb.h"

namespace spintune {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Fills the target and devices this source measures (agent_id, version
  // and applied version are the caller's).
  virtual void Describe(v1::Hello* hello) const = 0;
  // Appends up to `max_completions` completion samples, and the dispatch
  // samples that go with them, to `batch`. Returns how many completions it
  // appended; 0 at the end of the stream. Deterministic sources return the
  // same samples for the same call sequence.
  virtual absl::StatusOr<size_t> Fill(size_t max_completions, v1::SampleBatch* batch) = 0;
};

// "sim:BOARD" -> a SimSource seeded with `seed`. InvalidArgument for an
// unknown spec or board.
absl::StatusOr<std::unique_ptr<SampleSource>> MakeSampleSource(const std::string& spec,
                                                               uint64_t seed);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_SAMPLE_SOURCE_H_
