#include "agent/csv_source.h"

#include "absl/strings/str_cat.h"
#include "policy/samples_csv.h"
#include "common/status_macros.h"
#include "policy/policy_proto.h"

namespace spintune {

absl::StatusOr<std::unique_ptr<CsvSource>> CsvSource::Open(const std::string& csv_path,
                                                           const std::string& platform_path) {
  // The full validation pass: the same reader `spintune tune` uses.
  SPINTUNE_ASSIGN_OR_RETURN(SampleSet samples, ReadSamplesCsv(csv_path));
  SPINTUNE_ASSIGN_OR_RETURN(PlatformFile platform, ReadPlatformFile(platform_path));
  std::unique_ptr<CsvSource> s(new CsvSource());
  s->path_ = csv_path;
  auto* target = s->hello_.mutable_target();
  target->set_board(platform.board);
  for (const auto& name : samples.cpu_classes) {
    SPINTUNE_ASSIGN_OR_RETURN(CpuClassInfo cpu, platform.CpuClass(name));
    CpuClassToProto(cpu, target->add_cpu_classes());
    s->class_index_[name] = static_cast<uint32_t>(s->class_index_.size());
  }
  for (const auto& name : samples.devices) {
    DeviceToProto(platform.Device(name), s->hello_.add_devices());
    s->device_index_[name] = static_cast<uint32_t>(s->device_index_.size());
  }
  SPINTUNE_ASSIGN_OR_RETURN(s->reader_, CompletionsCsvReader::Open(csv_path));
  return s;
}

absl::StatusOr<size_t> CsvSource::Fill(size_t max_completions, v1::SampleBatch* batch) {
  auto* c = batch->mutable_completions();
  CompletionRow row;
  size_t n = 0;
  while (n < max_completions) {
    SPINTUNE_ASSIGN_OR_RETURN(bool more, reader_->Next(&row));
    if (!more) {
      exhausted_ = true;
      break;
    }
    c->add_device_index(device_index_.at(row.device));
    c->add_cpu_class_index(class_index_.at(row.cpu_class));
    c->add_opcode(row.opcode);
    c->add_bytes(row.bytes);
    c->add_wait_ns(row.wait_ns);
    c->add_path(row.path == "irq"    ? v1::WAIT_PATH_IRQ
                : row.path == "spin" ? v1::WAIT_PATH_SPIN
                                     : v1::WAIT_PATH_UNKNOWN);
    // SampleBatch flags: bit 0 error, bit 1 timeout.
    c->add_flags((row.error ? 1u : 0u) | (row.timeout ? 2u : 0u));
    if (row.issue_ns) c->add_issue_ns(*row.issue_ns);  // in every row or in none
    ++n;
  }
  return n;
}

}  // namespace spintune
