#include "agent/sample_source.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/board_model.h"
#include "agent/csv_source.h"
#include "agent/host_probe.h"
#include "agent/replay_source.h"
#include "agent/sim_source.h"
#include "agent/trace/trace_reader.h"
#include "agent/tracefs_source.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "policy/platform_json.h"

namespace spintune {
namespace {

absl::StatusOr<std::unique_ptr<SampleSource>> OpenTracefs(const std::string& devices_spec,
                                                          const SourceOptions& options) {
  std::set<std::string> devices;
  for (absl::string_view d : absl::StrSplit(devices_spec, ',', absl::SkipEmpty())) {
    devices.emplace(d);
  }
  if (!options.block_dev.empty()) {
    return absl::InvalidArgumentError("--block-dev is for replay: live capture names disks itself");
  }
  SPINTUNE_ASSIGN_OR_RETURN(const CaptureMode mode, ParseCaptureMode(options.capture));
  SPINTUNE_ASSIGN_OR_RETURN(const WakeWindows wakes, ParseWakeWindows(options.wake_windows));
  SPINTUNE_ASSIGN_OR_RETURN(const WakeWindows windows,
                            ParseWindows(options.capture_windows, "--capture-windows"));
  SPINTUNE_ASSIGN_OR_RETURN(CorrelatorOptions correlator,
                            CorrelatorOptionsFromFlags(options.pairs, options.irq, {}));
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string board = host;
  CpuClassInfo cpu;
  uint64_t irq_overhead_cpu_ns = 0;
  if (!options.platform.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(PlatformFile platform, ReadPlatformFile(options.platform));
    SPINTUNE_ASSIGN_OR_RETURN(cpu, platform.CpuClass("default"));
    if (platform.board != "offline") board = platform.board;
  } else {
    Logger().info("no --platform: probing this host's platform costs (a few seconds)");
    const HostProbeResult probe = ProbeHost(HostProbeOptions{});
    Logger().info("{}", probe.Report());
    cpu.costs = probe.Costs();
    irq_overhead_cpu_ns = probe.IrqOverheadNs();
  }
  cpu.name = "default";
  if (cpu.cpu_khz == 0) cpu.cpu_khz = HostCpuKhz();
  SPINTUNE_ASSIGN_OR_RETURN(auto source,
                            TracefsSource::Open(std::move(devices), cpu, irq_overhead_cpu_ns, board,
                                                std::move(correlator), mode,
                                                options.capture_samples, wakes, windows));
  return std::unique_ptr<SampleSource>(std::move(source));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SampleSource>> MakeSampleSource(const std::string& spec,
                                                               const SourceOptions& options) {
  if (absl::StartsWith(spec, "sim:")) {
    const std::string name = spec.substr(4);
    const BoardModel* board = FindBoard(name);
    if (board == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown simulated board '", name, "' (spintune-agent --list-boards lists them)"));
    }
    return std::unique_ptr<SampleSource>(
        new SimSource(*board, options.seed, options.sim_timer_wake_factor));
  }
  if (absl::StartsWith(spec, "csv:")) {
    if (options.platform.empty()) {
      return absl::InvalidArgumentError("a csv: source needs --platform FILE");
    }
    SPINTUNE_ASSIGN_OR_RETURN(auto csv, CsvSource::Open(spec.substr(4), options.platform));
    return std::unique_ptr<SampleSource>(std::move(csv));
  }
  if (absl::StartsWith(spec, "replay:")) {
    SPINTUNE_ASSIGN_OR_RETURN(auto replay, ReplaySource::Open(spec.substr(7), options));
    return std::unique_ptr<SampleSource>(std::move(replay));
  }
  if (spec == "tracefs" || absl::StartsWith(spec, "tracefs:")) {
    return OpenTracefs(spec.size() > 8 ? spec.substr(8) : "", options);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown source '", spec, "' (expected sim:BOARD, csv:FILE, replay:FILE or tracefs[:DEVICES])"));
}

absl::StatusOr<std::unique_ptr<SampleSource>> MakeSampleSource(const std::string& spec,
                                                               uint64_t seed) {
  SourceOptions options;
  options.seed = seed;
  return MakeSampleSource(spec, options);
}

}  // namespace spintune
