// libFuzzer target: arbitrary bytes as the samples CSV of `spintune tune`
// and the agent's csv: source. Errors are fine; crashes, hangs and leaks
// are not.
#include <cstdint>

#include "policy/fuzz/scratch_file.h"
#include "policy/samples_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const spintune::FuzzScratchFile file(".csv");
  if (!file.Write(data, size)) return 0;
  auto set = spintune::ReadSamplesCsv(file.path());
  if (set.ok()) {
    uint64_t total = 0;
    for (const auto& k : set->keys) total += k.histogram.total_count();
    if (total != set->samples) __builtin_trap();  // every row lands in one key
  }
  return 0;
}
