#include "agent/replay_source.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "policy/platform_json.h"
#include "policy/policy_proto.h"

namespace spintune {

absl::StatusOr<std::unique_ptr<ReplaySource>> ReplaySource::Open(const std::string& trace_path,
                                                                 const SourceOptions& options) {
  if (trace_path == "-") {
    return absl::InvalidArgumentError("replay: reads its file twice; stdin is not supported");
  }
  if (options.platform.empty()) {
    return absl::InvalidArgumentError("a replay: source needs --platform FILE (platform costs)");
  }
  SPINTUNE_ASSIGN_OR_RETURN(PlatformFile platform, ReadPlatformFile(options.platform));
  SPINTUNE_ASSIGN_OR_RETURN(
      CorrelatorOptions correlator,
      CorrelatorOptionsFromFlags(options.pairs, options.irq, options.block_dev));

  // Pass 1: which devices does the trace measure?
  std::set<std::string> devices;
  SPINTUNE_ASSIGN_OR_RETURN(auto scan, TraceReader::Open(trace_path, correlator));
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool more, scan->ReadMore(4096));
    for (const auto& c : scan->correlator().completions()) devices.insert(c.device);
    for (const auto& d : scan->correlator().dispatches()) {
      if (!d.device.empty()) devices.insert(d.device);
    }
    scan->correlator().completions().clear();
    scan->correlator().dispatches().clear();
    if (!more) break;
  }
  SPINTUNE_RETURN_IF_ERROR(scan->CheckUsable());
  const auto& st = scan->correlator().stats();
  Logger().info("replay {}: {} lines, {} completions, {} dispatch samples, devices: {}",
                trace_path, scan->lines(), st.completions, st.dispatches,
                absl::StrJoin(devices, ","));
  if (!scan->skipped().counts.empty()) {
    Logger().info("replay {}: lines not used:\n{}", trace_path, scan->skipped().Summary());
  }

  std::unique_ptr<ReplaySource> s(new ReplaySource());
  s->skipped_ = scan->skipped();
  auto* target = s->hello_.mutable_target();
  target->set_board(platform.board);
  SPINTUNE_ASSIGN_OR_RETURN(CpuClassInfo cpu, platform.CpuClass("default"));
  CpuClassToProto(cpu, target->add_cpu_classes());
  std::vector<std::string> names(devices.begin(), devices.end());
  for (const auto& name : names) DeviceToProto(platform.Device(name), s->hello_.add_devices());
  s->batcher_ = std::make_unique<TraceBatcher>(names);
  // Pass 2 streams.
  SPINTUNE_ASSIGN_OR_RETURN(s->reader_, TraceReader::Open(trace_path, std::move(correlator)));
  s->path_ = trace_path;
  s->total_lines_ = scan->lines();
  return s;
}

absl::StatusOr<size_t> ReplaySource::Fill(size_t max_completions, v1::SampleBatch* batch) {
  SPINTUNE_ASSIGN_OR_RETURN(bool more, reader_->ReadMore(max_completions));
  auto& c = reader_->correlator().completions();
  const size_t n = batcher_->Drain(&c, &reader_->correlator().dispatches(), max_completions, batch);
  if (!more && c.empty()) exhausted_ = true;
  // Long replays report progress in tenths (a log line, not cursor
  // control: the agent's stderr is a log).
  if (total_lines_ >= kProgressMinLines) {
    const uint64_t tenth = reader_->lines() * 10 / total_lines_;
    if (tenth > reported_tenths_ && tenth < 10) {
      reported_tenths_ = tenth;
      Logger().info("replay {}: {}% ({} of {} lines)", path_, tenth * 10, reader_->lines(),
                    total_lines_);
    }
  }
  return n;
}

}  // namespace spintune
