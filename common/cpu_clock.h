// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), for measuring
// what a piece of work costs on one thread; and CLOCK_MONOTONIC, the clock
// of the agent's tracing instances ("mono") and BPF programs.
//
// Thread-safe.
#ifndef SPINTUNE_COMMON_CPU_CLOCK_H_
#define SPINTUNE_COMMON_CPU_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace spintune {

inline uint64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace spintune

#endif  // SPINTUNE_COMMON_CPU_CLOCK_H_
