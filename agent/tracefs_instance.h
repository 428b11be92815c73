// TracefsInstance: a private ftrace instance (instances/spintune-<pid>, then
// spintune-<pid>-<n> for a process's further instances) with
// only the events the agent needs, and its trace_pipe. Never touches the
// global buffer. Mounts tracefs at /sys/kernel/tracing when nothing is
// mounted there; removes instances left by agents that died (kill -9) before
// creating its own; removes its own in the destructor.
//
// The text path reads trace_pipe; the raw capture reads the per-CPU binary
// buffers of the same instance (agent/capture/raw/raw_event_reader.h). Their
// costs at 10,000 requests/s are in docs/benchmarks.md.
//
// Thread-safety: Open/destructor on one thread; Read may run on another
// thread while the owner only keeps the object alive.
#ifndef SPINTUNE_AGENT_TRACEFS_INSTANCE_H_
#define SPINTUNE_AGENT_TRACEFS_INSTANCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace spintune {

struct TracefsOptions {
  // "system/event" names; events this kernel does not have are left out
  // (listed in missing_events()) unless they are in `required`.
  std::vector<std::string> events;
  std::vector<std::string> required;
  // "system/event" -> filter expression (kernel filter syntax); a filter the
  // kernel refuses is logged and left out.
  std::vector<std::pair<std::string, std::string>> filters;
  int buffer_size_kb = 4096;  // per CPU
  std::string clock = "mono";
  std::string name_prefix = "spintune";
  // false: the reader uses the per-CPU trace_pipe_raw files instead (Read
  // then returns nothing).
  bool open_trace_pipe = true;
};

class TracefsInstance {
 public:
  // FailedPrecondition (with what to do) without root or tracefs;
  // NotFound for a required event the kernel lacks.
  static absl::StatusOr<std::unique_ptr<TracefsInstance>> Open(const TracefsOptions& options);
  ~TracefsInstance();

  // Reads what trace_pipe holds, waiting at most `timeout` for the first
  // byte. Returns the bytes read (0 after the timeout).
  absl::StatusOr<size_t> Read(char* buffer, size_t size, absl::Duration timeout);

  const std::string& path() const { return path_; }
  const std::string& root() const { return root_; }
  const std::vector<std::string>& enabled_events() const { return enabled_; }
  const std::vector<std::string>& missing_events() const { return missing_; }
  // Turns enabled "system/event" names off or on again (the kernel patches
  // the tracepoints in or out: use it seconds apart, not per event).
  absl::Status SetEnabled(const std::vector<std::string>& events, bool on);

  // Where tracefs is mounted (mounting it when needed).
  static absl::StatusOr<std::string> MountPoint();
  // Removes instances named PREFIX-PID[-N] whose process is gone; returns how many.
  static int RemoveStaleInstances(const std::string& root, const std::string& prefix);

 private:
  TracefsInstance() = default;
  std::string root_;
  std::string path_;
  int pipe_fd_ = -1;
  std::vector<std::string> enabled_;
  std::vector<std::string> missing_;
};

// "/sys/dev/block/254:0" -> "vda"; "MAJOR:MINOR" when it cannot be resolved.
std::string BlockDeviceName(int major, int minor);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_TRACEFS_INSTANCE_H_
