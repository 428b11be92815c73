// OutcomeReportSource: a sample source with the outcome reports a driver
// wrote (policy/outcome_report.h, `spintune-agent --outcomes FILE`), each
// report one batch of KeyOutcome in the order given, so the tuner's
// verifier (tuner/verifier.h) compares what the driver measured under a
// pushed version with what it measured under the version before.
//
// Where the reports go:
//   - after the last batch of a source that ends (csv:, replay:). The
//     batches stay a function of the agent's inputs, so an agent re-run
//     with the same CSV and reports resends, not duplicates. To add the
//     reports of a later run, give the earlier ones first: they are resent,
//     the new ones follow. (A new report where an earlier run had another
//     is a conflicting resend: refused.)
//   - before the first batch of a live source (tracefs): its batches are
//     numbered after the tuner's last durable one, never regenerated.
// A simulated board neither ends nor is live: refused.
//
// Thread-safety: one thread.
#ifndef SPINTUNE_AGENT_OUTCOME_REPORT_SOURCE_H_
#define SPINTUNE_AGENT_OUTCOME_REPORT_SOURCE_H_

#include <memory>
#include <vector>

#include "agent/sample_source.h"
#include "policy/outcome_report.h"

namespace spintune {

class OutcomeReportSource : public SampleSource {
 public:
  // InvalidArgument when `inner` neither ends nor is live (a simulated
  // board) or a report names a device or CPU class that `inner` does not
  // describe. A CPU class is named as `inner` names it or, in spintune.ko's
  // reports, by its index in the table the agent wrote ("default" for 0,
  // "classN" for N; the agent's blobs number classes in `inner`'s order).
  // REQUIRES: inner != nullptr.
  static absl::StatusOr<std::unique_ptr<SampleSource>> Wrap(std::unique_ptr<SampleSource> inner,
                                                            bool inner_ends,
                                                            std::vector<OutcomeReport> reports);

  void Describe(v1::Hello* hello) const override { inner_->Describe(hello); }
  absl::StatusOr<size_t> Fill(size_t max_completions, v1::SampleBatch* batch) override;
  bool exhausted() const override { return inner_->exhausted() && next_ == reports_.size(); }
  bool live() const override { return inner_->live(); }
  void OnTableApplied(const PolicyTable& table) override { inner_->OnTableApplied(table); }

 private:
  explicit OutcomeReportSource(std::unique_ptr<SampleSource> inner)
      : inner_(std::move(inner)) {}

  std::unique_ptr<SampleSource> inner_;
  std::vector<std::vector<v1::KeyOutcome>> reports_;  // one batch each
  size_t next_ = 0;                                   // the next to send
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_OUTCOME_REPORT_SOURCE_H_
