// The file a fuzz target hands its input to a reader through: one per
// process in /dev/shm, removed when the process exits normally (libFuzzer's
// -runs=N and -max_total_time end with exit()).
#ifndef SPINTUNE_POLICY_FUZZ_SCRATCH_FILE_H_
#define SPINTUNE_POLICY_FUZZ_SCRATCH_FILE_H_

#include <unistd.h>

#include <cstdio>
#include <string>

namespace spintune {

class FuzzScratchFile {
 public:
  // `suffix` names the format for the reader (".csv", ".json").
  explicit FuzzScratchFile(const char* suffix)
      : path_("/dev/shm/spintune-fuzz-" + std::to_string(getpid()) + suffix) {}
  ~FuzzScratchFile() { std::remove(path_.c_str()); }
  FuzzScratchFile(const FuzzScratchFile&) = delete;
  FuzzScratchFile& operator=(const FuzzScratchFile&) = delete;

  // Replaces the file's content with `data`; false when it cannot be written.
  bool Write(const uint8_t* data, size_t size) const {
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (f == nullptr) return false;
    const bool ok = std::fwrite(data, 1, size, f) == size;
    return std::fclose(f) == 0 && ok;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace spintune

#endif  // SPINTUNE_POLICY_FUZZ_SCRATCH_FILE_H_
