// Small file helpers shared by the binaries.
#ifndef SPINTUNE_COMMON_FILE_UTIL_H_
#define SPINTUNE_COMMON_FILE_UTIL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace spintune {

// Writes `bytes` to `path` atomically: a temporary file in the same
// directory, fsync, rename over `path`, fsync of the directory. Readers see
// the old or the new content, never a mix; after return the new content
// survives a crash. Unavailable (with the errno text) on failure.
// `mode`: the file's permissions (a token file wants 0600).
absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes,
                                 int mode = 0644);

// `name` with every character but letters, digits and '-' replaced by '_':
// safe as one path component ("host/sim:x" -> "host_sim_x").
std::string SafeFileName(const std::string& name);

// True when `path` exists (any kind of file).
bool PathExists(const std::string& path);

// InvalidArgument "PATH is a directory, expected a file" when `path` is a
// directory; OK otherwise (also when it does not exist).
absl::Status CheckNotDirectory(const std::string& path);

// The whole file. NotFound when it cannot be opened, InvalidArgument when it
// is a directory or larger than `max_bytes`.
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             uint64_t max_bytes = uint64_t{1} << 40);

}  // namespace spintune

#endif  // SPINTUNE_COMMON_FILE_UTIL_H_
