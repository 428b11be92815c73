#include "agent/capture/capture.h"

#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/capture/bpf/bpf_capture.h"
#include "agent/capture/tracefs_capture.h"
#include "agent/tracefs_instance.h"
#include "common/file_util.h"
#include "common/logging.h"

namespace spintune {
namespace {

// Creates and closes a one-entry array map: bpf() works for this process
// (CAP_BPF or root, not refused by lockdown or unprivileged_bpf_disabled).
bool BpfSyscallWorks(std::string* why) {
  union bpf_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.map_type = BPF_MAP_TYPE_ARRAY;
  attr.key_size = 4;
  attr.value_size = 4;
  attr.max_entries = 1;
  const long fd = ::syscall(__NR_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
  if (fd < 0) {
    *why = absl::StrCat("bpf() refused: ", std::strerror(errno));
    return false;
  }
  ::close(static_cast<int>(fd));
  return true;
}

}  // namespace

absl::StatusOr<CaptureMode> ParseCaptureMode(absl::string_view name) {
  if (name == "auto") return CaptureMode::kAuto;
  if (name == "bpf") return CaptureMode::kBpf;
  if (name == "raw") return CaptureMode::kRaw;
  if (name == "text") return CaptureMode::kText;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown capture mode '", name, "' (auto, bpf, raw or text)"));
}

const char* CaptureModeName(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::kAuto:
      return "auto";
    case CaptureMode::kBpf:
      return "bpf";
    case CaptureMode::kRaw:
      return "raw";
    case CaptureMode::kText:
      return "text";
  }
  return "?";
}

uint64_t CaptureOutput::CompletionCount() const {
  uint64_t n = completions.size();
  for (const auto& h : histograms) n += h.wait.count;
  return n;
}

CaptureSupport ProbeCaptureSupport() {
  CaptureSupport s;
  std::vector<std::string> why;
  s.bpf_built = BpfCaptureBuilt();
  if (!s.bpf_built) why.push_back("built without the BPF program");
  std::string bpf_why;
  s.bpf_syscall = BpfSyscallWorks(&bpf_why);
  if (!s.bpf_syscall) why.push_back(bpf_why);
  s.btf = ::access("/sys/kernel/btf/vmlinux", R_OK) == 0;
  if (!s.btf) why.push_back("no BTF at /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF)");
  auto root = TracefsInstance::MountPoint();
  s.tracefs = root.ok() && ::geteuid() == 0;
  if (!root.ok()) {
    why.push_back(std::string(root.status().message()));
  } else if (!s.tracefs) {
    why.push_back("tracing instances need root");
  } else {
    s.raw_pipe = PathExists(*root + "/per_cpu/cpu0/trace_pipe_raw");
    if (!s.raw_pipe) why.push_back("no per-CPU trace_pipe_raw");
  }
  s.detail = absl::StrJoin(why, "; ");
  return s;
}

absl::StatusOr<std::unique_ptr<Capture>> OpenCapture(CaptureMode mode, CaptureConfig options,
                                                     const SupportProbe& probe) {
  const CaptureSupport support = probe();
  const bool bpf_ok = support.bpf_built && support.bpf_syscall && support.btf;
  const bool raw_ok = support.tracefs && support.raw_pipe;
  auto unavailable = [&support](const char* what) {
    return absl::FailedPreconditionError(
        absl::StrCat("--capture ", what, " is not possible here: ", support.detail));
  };
  switch (mode) {
    case CaptureMode::kBpf:
      if (!bpf_ok) return unavailable("bpf");
      return OpenBpfCapture(options);
    case CaptureMode::kRaw:
      if (!raw_ok) return unavailable("raw");
      return TracefsCapture::Open(options, true);
    case CaptureMode::kText:
      return TracefsCapture::Open(options, false);
    case CaptureMode::kAuto:
      break;
  }
  std::string passed_over;
  if (!options.correlator.pairs.empty()) {
    passed_over = "bpf: --pairs events need the correlator";
  } else if (!bpf_ok) {
    passed_over = absl::StrCat("bpf: ", support.detail);
  } else {
    auto bpf = OpenBpfCapture(options);
    if (bpf.ok()) {
      Logger().info("capture: bpf (BPF syscall and BTF available; in-kernel histograms)");
      return bpf;
    }
    passed_over = absl::StrCat("bpf: ", bpf.status().message());
  }
  if (raw_ok) {
    auto raw = TracefsCapture::Open(options, true);
    if (raw.ok()) {
      Logger().info("capture: raw (binary trace_pipe_raw pages); not bpf because {}", passed_over);
      return raw;
    }
    absl::StrAppend(&passed_over, "; raw: ", raw.status().message());
  } else {
    absl::StrAppend(&passed_over, "; raw: ", support.detail);
  }
  auto text = TracefsCapture::Open(options, false);
  if (text.ok()) {
    Logger().warn("capture: text (trace_pipe, the costliest); not bpf or raw because {}",
                  passed_over);
  }
  return text;
}

}  // namespace spintune
