// libFuzzer target: arbitrary bytes as the samples CSV of `spintune tune`
// and the agent's csv: source. Errors are fine; crashes, hangs and leaks
// are not.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "policy/samples_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/dev/shm/spintune-fuzz-" + std::to_string(getpid()) + ".csv";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto set = spintune::ReadSamplesCsv(path);
  if (set.ok()) {
    uint64_t total = 0;
    for (const auto& k : set->keys) total += k.histogram.total_count();
    if (total != set->samples) __builtin_trap();  // every row lands in one key
  }
  return 0;
}
