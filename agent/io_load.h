// IoLoad: the bundled load generator of `make demo-live`, the live test and
// the host probe: O_DIRECT reads and writes of several sizes at random
// aligned offsets of a scratch file, with an fsync every few writes, from
// one or more threads, optionally paced to a request rate.
//
// Thread-safety: RunIoLoad may be called from any thread; `stop` may be set
// from another thread.
#ifndef SPINTUNE_AGENT_IO_LOAD_H_
#define SPINTUNE_AGENT_IO_LOAD_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace spintune {

struct IoLoadOptions {
  std::string path = "/var/tmp/spintune-load.bin";  // created, removed after
  uint64_t file_bytes = 64ull << 20;
  std::vector<uint32_t> sizes = {4096, 16384, 65536, 262144};  // multiples of 4096
  double write_share = 0.3;     // share of requests that are writes
  uint32_t fsync_every = 16;    // writes per fsync (0: never)
  int threads = 1;
  double requests_per_second = 0;  // all threads together; 0: as fast as it goes
  absl::Duration duration = absl::Seconds(5);
  uint64_t seed = 1;
  bool keep_file = false;
};

struct IoLoadResult {
  uint64_t reads = 0;
  uint64_t writes = 0;
  uint64_t fsyncs = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

// InvalidArgument for bad options; Unavailable (with errno text) when the
// file cannot be created or O_DIRECT I/O fails (e.g. tmpfs has no O_DIRECT).
absl::StatusOr<IoLoadResult> RunIoLoad(const IoLoadOptions& options,
                                       const std::atomic<bool>* stop = nullptr);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_IO_LOAD_H_
