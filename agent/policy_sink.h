// PolicySink: where the agent hands a pushed policy blob to the driver.
//
//   file:PATH   atomic replace: write PATH.tmp, fsync, rename over PATH,
//               fsync the directory (a firmware file a driver loads).
//   attr:PATH   one write() of the whole blob, as a sysfs/debugfs attribute
//               needs (a partial write is an error).
//   shm:NAME    a POSIX shared memory object (/dev/shm/NAME) holding the blob
//               behind a seqlock (driver/include/spintune/shm.h), for
//               user-space drivers.
//   none        validate only (nothing is written).
//
// PATH and NAME may contain {device}, and must when the target has more than
// one device. Every sink verifies what it delivered with the driver's parser
// (file and shm: read back; attr: read back when the attribute is readable,
// else the full write count).
// Thread-safety: one thread at a time.
#ifndef SPINTUNE_AGENT_POLICY_SINK_H_
#define SPINTUNE_AGENT_POLICY_SINK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace spintune {

class PolicySink {
 public:
  virtual ~PolicySink() = default;
  // Delivers `blob` (a valid policy blob) for `device` and verifies it.
  virtual absl::Status Apply(const std::string& device, const std::string& blob) = 0;
  // Where a device's blob goes, for logs.
  virtual std::string Where(const std::string& device) const = 0;
};

// InvalidArgument for an unknown spec or a file path without {device} when
// `devices` has more than one entry; FailedPrecondition when a device's
// destination cannot be written now (file: its directory is missing or
// read-only; attr: the attribute does not exist or is read-only).
absl::StatusOr<std::unique_ptr<PolicySink>> MakePolicySink(
    const std::string& spec, const std::vector<std::string>& devices);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_POLICY_SINK_H_
