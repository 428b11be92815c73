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
  SPINTUNE_ASSIGN_OR_RETURN(s->reader_, CsvReader::Open(csv_path));
  s->c_device_ = s->reader_->ColumnIndex("device");
  s->c_opcode_ = s->reader_->ColumnIndex("opcode");
  s->c_bytes_ = s->reader_->ColumnIndex("bytes");
  s->c_wait_ = s->reader_->ColumnIndex("wait_ns");
  s->c_cpu_ = s->reader_->ColumnIndex("cpu_class");
  s->c_path_ = s->reader_->ColumnIndex("path");
  s->c_error_ = s->reader_->ColumnIndex("error");
  s->c_issue_ = s->reader_->ColumnIndex("issue_ns");
  return s;
}

absl::StatusOr<size_t> CsvSource::Fill(size_t max_completions, v1::SampleBatch* batch) {
  auto* c = batch->mutable_completions();
  std::vector<std::string> f;
  size_t n = 0;
  while (n < max_completions) {
    SPINTUNE_ASSIGN_OR_RETURN(bool more, reader_->Next(&f));
    if (!more) {
      exhausted_ = true;
      break;
    }
    const std::string cpu = c_cpu_ >= 0 && !f[c_cpu_].empty() ? f[c_cpu_] : "default";
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t opcode, reader_->ParseUint(f[c_opcode_], "opcode"));
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t bytes, reader_->ParseUint(f[c_bytes_], "bytes"));
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t wait, reader_->ParseUint(f[c_wait_], "wait_ns"));
    const std::string path = c_path_ >= 0 ? f[c_path_] : "";
    c->add_device_index(device_index_.at(f[c_device_]));
    c->add_cpu_class_index(class_index_.at(cpu));
    c->add_opcode(static_cast<uint32_t>(opcode));
    c->add_bytes(bytes);
    c->add_wait_ns(wait);
    c->add_path(path == "irq" ? v1::WAIT_PATH_IRQ
                              : path == "spin" ? v1::WAIT_PATH_SPIN : v1::WAIT_PATH_UNKNOWN);
    c->add_flags(c_error_ >= 0 && f[c_error_] == "1" ? 1u : 0u);
    if (c_issue_ >= 0) {  // ReadSamplesCsv checked: in every row or in none
      SPINTUNE_ASSIGN_OR_RETURN(uint64_t issue, reader_->ParseUint(f[c_issue_], "issue_ns"));
      c->add_issue_ns(issue);
    }
    ++n;
  }
  return n;
}

}  // namespace spintune
