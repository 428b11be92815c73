// Input files for deterministic agent sources in tests: a completions CSV,
// a replayable block trace (trace_pipe text) and the platform file both
// need, each with exactly `samples` completion samples.
#ifndef SPINTUNE_TESTS_TESTING_SOURCE_FILES_H_
#define SPINTUNE_TESTS_TESTING_SOURCE_FILES_H_

#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"

namespace spintune::testing {

inline void WritePlatformFile(const std::string& path) {
  std::ofstream(path) << R"({"irq_cpu_ns": 8000, "irq_wake_ns": 40000, "poll_read_ns": 200,
                           "timer_cpu_ns": 20000, "timer_wake_ns": 30000, "board": "test-files"})";
}

// Device mmc0, CMD18/CMD25, 512 B..4 KiB.
inline void WriteSamplesCsv(const std::string& path, uint64_t samples, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::ofstream csv(path);
  csv << "device,opcode,bytes,wait_ns,path,error,cpu_class\n";
  for (uint64_t i = 0; i < samples; ++i) {
    csv << "mmc0," << (i % 3 == 0 ? 25 : 18) << "," << (512u << (i % 4)) << ","
        << 20000 + rng() % 200000 << "," << (i % 2 ? "irq" : "spin") << ",0,default\n";
  }
}

// 4 KiB reads of block device 254:0 (--block-dev 254:0=vda), one at a time.
inline void WriteBlockTrace(const std::string& path, uint64_t samples, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::ofstream trace(path);
  double t = 1000.0;
  for (uint64_t i = 0; i < samples; ++i) {
    const uint64_t sector = 8 * i;
    const double wait = (30 + static_cast<double>(rng() % 300)) * 1e-6;
    trace << absl::StrFormat(
        "            fio-4242    [000] .....  %.6f: block_rq_issue: 254,0 R 4096 () %d + 8 "
        "be,0,4 [fio]\n          <idle>-0       [001] ..s1.  %.6f: block_rq_complete: 254,0 R "
        "() %d + 8 be,0,4 [0]\n",
        t, sector, t + wait, sector);
    t += wait + 2e-6;
  }
}

// The agent arguments for the three deterministic source kinds over files
// written in `dir` (a simulated board, the CSV, the trace).
inline std::vector<std::vector<std::string>> DeterministicSources(const std::string& dir,
                                                                  uint64_t samples) {
  WritePlatformFile(dir + "/platform.json");
  WriteSamplesCsv(dir + "/samples.csv", samples, 7);
  WriteBlockTrace(dir + "/trace.txt", samples, 7);
  return {{"--source", "sim:microwatt-100mhz", "--seed", "1"},
          {"--source", "csv:" + dir + "/samples.csv", "--platform", dir + "/platform.json"},
          {"--source", "replay:" + dir + "/trace.txt", "--platform", dir + "/platform.json",
           "--block-dev", "254:0=vda"}};
}

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_SOURCE_FILES_H_
