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
//
// Each sink also says the highest blob format its drivers read (the agent's
// Hello max_blob_format; format 3 carries A/B trials): attr asks the
// driver, in the file `max_blob_format` beside the attribute (spintune.ko
// has one; a driver without it is taken to read format 2); file and shm
// cannot ask their readers and say 2 unless told (`declared_blob_format`,
// the agent's --driver-blob-format); none says what this agent's own parser
// reads (nothing else reads its blobs).
// Thread-safety: one thread at a time.
#ifndef SPINTUNE_AGENT_POLICY_SINK_H_
#define SPINTUNE_AGENT_POLICY_SINK_H_

#include <cstdint>
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
  // The highest blob format every driver behind this sink reads (2 or 3).
  uint32_t MaxBlobFormat() const { return max_blob_format_; }

 protected:
  explicit PolicySink(uint32_t max_blob_format) : max_blob_format_(max_blob_format) {}

 private:
  const uint32_t max_blob_format_;
};

// What a driver that does not say reads: the format tables without A/B
// trials are written in (SPINTUNE_BLOB_VERSION).
inline constexpr uint32_t kBaseBlobFormat = 2;

// InvalidArgument for an unknown spec or a file path without {device} when
// `devices` has more than one entry; FailedPrecondition when a device's
// destination cannot be written now (file: its directory is missing or
// read-only; attr: the attribute does not exist or is read-only).
// `declared_blob_format` (0: not declared; else 2 or 3) replaces what the
// sink would say of its drivers.
absl::StatusOr<std::unique_ptr<PolicySink>> MakePolicySink(
    const std::string& spec, const std::vector<std::string>& devices,
    uint32_t declared_blob_format = 0);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_POLICY_SINK_H_
