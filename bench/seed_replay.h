// Replays the throughput tables of the seed reports on the simulated boards:
// a 32 MiB copy through litex-mmc (4 KiB requests: CMD23 + CMD18 to read,
// CMD23 + CMD25 + CMD13 to write) under each driver configuration the
// reports list and under spintune's table, as simulated KB/s beside the
// measured numbers. See docs/benchmarks.md for where they agree.
#ifndef SPINTUNE_BENCH_SEED_REPLAY_H_
#define SPINTUNE_BENCH_SEED_REPLAY_H_

#include <string>

namespace spintune {

std::string RenderSeedReplay();

}  // namespace spintune

#endif  // SPINTUNE_BENCH_SEED_REPLAY_H_
