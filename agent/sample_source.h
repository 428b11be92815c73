// SampleSource: where an agent's measurements come from (a simulated board,
// later live tracefs and trace replay). Internal to agent/.
//
// Thread-safety: a source is used by one thread.
#ifndef SPINTUNE_AGENT_SAMPLE_SOURCE_H_
#define SPINTUNE_AGENT_SAMPLE_SOURCE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/policy_table.h"
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
  // appended: 0 means none right now (a live source) or, once exhausted()
  // is true, the end of the stream. A live source waits at most ~100 ms.
  // Deterministic sources return the same samples for the same call
  // sequence.
  virtual absl::StatusOr<size_t> Fill(size_t max_completions, v1::SampleBatch* batch) = 0;
  // True when the stream has ended (files, CSV); live sources never end.
  virtual bool exhausted() const = 0;
  // True for sources that measure now (tracefs): they cannot regenerate
  // earlier batches, so a restarted agent numbers new batches after the
  // tuner's last durable one instead of fast-forwarding.
  virtual bool live() const { return false; }
  // The agent applied `table` (a simulated driver waits by it from now on
  // and reports what its waits cost). Called between Fill() calls.
  virtual void OnTableApplied(const PolicyTable& table) {}
  // The agent is stopping: a live source that aggregates over intervals
  // hands over the interval in progress at the next Fill(), so that a clean
  // stop loses nothing it counted. Called between Fill() calls.
  virtual void EndInterval() {}
  // A live source with nothing to hand over before this time (one whose
  // kernel capture aggregates and is read once an interval): its caller
  // waits until then instead of calling Fill, which would wait up to
  // ~100 ms at a time. InfinitePast (the default): Fill at any time.
  virtual absl::Time quiet_until() const { return absl::InfinitePast(); }
};

struct SourceOptions {
  uint64_t seed = 1;           // sim:
  std::string platform;        // csv:, replay:, tracefs: platform JSON
  std::string pairs;           // replay:, tracefs: user-defined event pairs JSON
  std::vector<std::string> irq;  // DEVICE=IRQNAME
  std::vector<std::string> block_dev;  // replay: MAJOR:MINOR=NAME
  std::string capture = "auto";  // tracefs: auto | bpf | raw | text
  uint32_t capture_samples = 0;  // tracefs: every Nth completion as a sample (0: none)
  std::string wake_windows = "all";  // tracefs raw/text: ParseWakeWindows()
  std::string capture_windows = "all";  // tracefs: ParseWindows()
  // sim: the board's true timer oversleep is its declared one times this
  // (a platform model that is wrong, for verification).
  double sim_timer_wake_factor = 1;
};

// "sim:BOARD", "csv:FILE", "replay:FILE" or "tracefs[:DEV,DEV]".
// InvalidArgument for an unknown spec or board or missing options.
absl::StatusOr<std::unique_ptr<SampleSource>> MakeSampleSource(const std::string& spec,
                                                               const SourceOptions& options);
// Shorthand for simulated boards.
absl::StatusOr<std::unique_ptr<SampleSource>> MakeSampleSource(const std::string& spec,
                                                               uint64_t seed);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_SAMPLE_SOURCE_H_
