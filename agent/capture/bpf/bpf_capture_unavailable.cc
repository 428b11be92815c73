// The BPF capture of an agent built without clang's BPF target, libbpf or
// bpftool: `--capture auto` passes over it, `--capture bpf` says why.
#include "agent/capture/bpf/bpf_capture.h"

namespace spintune {

bool BpfCaptureBuilt() { return false; }

std::set<std::string> MissingBtfTracepoints(const std::set<std::string>& events) { return events; }

absl::StatusOr<std::unique_ptr<Capture>> OpenBpfCapture(const CaptureConfig&) {
  return absl::UnimplementedError(
      "this agent was built without the BPF capture (clang, libbpf-dev and bpftool were "
      "missing at build time)");
}

absl::StatusOr<std::unique_ptr<Capture>> OpenBpfCaptureForTest(const CaptureConfig& options,
                                                               const BpfCaptureTestOptions&) {
  return OpenBpfCapture(options);
}

}  // namespace spintune
