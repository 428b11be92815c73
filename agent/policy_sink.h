// PolicySink: where the agent hands a pushed policy blob to the driver.
//
//   file:PATH   atomic replace: write PATH.tmp, fsync, rename over PATH,
//               fsync the directory; PATH may contain {device}, and must when
//               the target has more than one device.
//   none        validate only (nothing is written).
//
// Every sink re-reads what it wrote and checks it with the driver's parser.
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
// `devices` has more than one entry.
absl::StatusOr<std::unique_ptr<PolicySink>> MakePolicySink(
    const std::string& spec, const std::vector<std::string>& devices);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_POLICY_SINK_H_
