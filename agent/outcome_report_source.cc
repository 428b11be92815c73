#include "agent/outcome_report_source.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/sample_batch_util.h"

namespace spintune {
namespace {

// The names of `hello`'s CPU classes, in order: the agent writes blobs
// numbering the classes as its Hello lists them (PolicyTableFromProto()).
std::vector<std::string> CpuClassNames(const v1::Hello& hello) {
  std::vector<std::string> names;
  for (const auto& c : hello.target().cpu_classes()) names.push_back(c.name());
  return names;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SampleSource>> OutcomeReportSource::Wrap(
    std::unique_ptr<SampleSource> inner, bool inner_ends, std::vector<OutcomeReport> reports) {
  if (!inner_ends && !inner->live()) {
    return absl::InvalidArgumentError(
        "--outcomes needs a source that ends (csv:, replay:; the reports follow its last "
        "batch) or a live one (tracefs; they come first)");
  }
  v1::Hello hello;
  inner->Describe(&hello);
  const std::vector<std::string> cpu_classes = CpuClassNames(hello);
  std::unique_ptr<OutcomeReportSource> s(new OutcomeReportSource(std::move(inner)));
  for (const auto& r : reports) {
    if (r.keys.empty()) continue;  // nothing to send
    std::vector<v1::KeyOutcome>& batch = s->reports_.emplace_back();
    int device = -1;
    for (int i = 0; i < hello.devices_size(); ++i) {
      if (hello.devices(i).name() == r.device) device = i;
    }
    if (device < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("outcome report of device '", r.device, "': the source has no such device"));
    }
    for (const auto& k : r.keys) {
      const int cpu = OutcomeCpuClassIndex(k.cpu_class, cpu_classes);
      if (cpu < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "outcome report of device '", r.device, "': the source has no CPU class '",
            k.cpu_class, "' (it describes ", hello.target().cpu_classes_size(), ")"));
      }
      v1::KeyOutcome o;
      o.set_device_index(static_cast<uint32_t>(device));
      o.set_cpu_class_index(static_cast<uint32_t>(cpu));
      o.set_opcode(k.opcode);
      o.set_size_class(k.size_class);
      o.set_policy_version(r.policy_version);
      o.set_arm(k.arm == OutcomeArm::kIncumbent ? v1::OUTCOME_ARM_INCUMBENT : v1::OUTCOME_ARM_TABLE);
      o.set_requests(k.moments.requests);
      o.set_cpu_ns_sum(k.moments.cpu_ns_sum);
      o.set_latency_ns_sum(k.moments.latency_ns_sum);
      o.set_cpu_ns_sq_sum(k.moments.cpu_ns_sq_sum);
      o.set_latency_ns_sq_sum(k.moments.latency_ns_sq_sum);
      o.set_cpu_latency_ns_sum(k.moments.cpu_latency_ns_sum);
      batch.push_back(std::move(o));
    }
  }
  return std::unique_ptr<SampleSource>(std::move(s));
}

absl::StatusOr<size_t> OutcomeReportSource::Fill(size_t max_completions,
                                                 v1::SampleBatch* batch) {
  if (inner_->live() && next_ < reports_.size()) {  // reports first
    for (const auto& o : reports_[next_]) *batch->add_outcomes() = o;
    ++next_;
    return 0;
  }
  if (!inner_->exhausted()) {
    auto n = inner_->Fill(max_completions, batch);
    if (!n.ok() || *n > 0 || HasMeasurements(*batch) || !inner_->exhausted()) return n;
  }
  if (next_ < reports_.size()) {
    for (const auto& o : reports_[next_]) *batch->add_outcomes() = o;
    ++next_;
  }
  return 0;
}

}  // namespace spintune
