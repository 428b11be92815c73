// Cost of the driver-side hot path: one lookup, and one lookup plus one spin
// check with the real clock (the condition already true), on a table of the
// maximum size; and parsing a full blob (done once per pushed table). Issue
// 18 states the targets against one clock_gettime(CLOCK_MONOTONIC) measured
// in the same run (BM_ClockGettime); the ratios are printed at the end.
#include <random>
#include <vector>

#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "spintune/wait.h"

namespace {

// The reference of issue 18's targets: one clock read.
using spintune::BM_ClockGettime;
BENCHMARK(BM_ClockGettime);

// Entries for 16 opcodes x 16 size classes x 4 CPU classes, plus the fallback.
std::vector<spintune_entry> Entries() {
  std::vector<spintune_entry> v;
  for (uint8_t cpu = 0; cpu < 4; ++cpu) {
    for (uint32_t op = 0; op < 16; ++op) {
      for (uint8_t sc = 0; sc < 16; ++sc) {
        spintune_entry e{};
        e.cpu_class = cpu;
        e.size_class = sc;
        e.strategy = SPINTUNE_SPIN_THEN_IRQ;
        e.opcode = op;
        e.spin_ns = 5000;
        v.push_back(e);
      }
    }
  }
  spintune_entry fallback{};
  fallback.cpu_class = SPINTUNE_ANY_CPU_CLASS;
  fallback.size_class = SPINTUNE_ANY_SIZE_CLASS;
  fallback.strategy = SPINTUNE_IRQ;
  fallback.flags = SPINTUNE_ENTRY_FALLBACK;
  fallback.opcode = SPINTUNE_ANY_OPCODE;
  v.push_back(fallback);
  return v;
}

void BM_Lookup(benchmark::State& state) {
  const auto entries = Entries();
  spintune_table t{entries.data(), static_cast<uint32_t>(entries.size()), 1, "bench"};
  std::mt19937 rng(1);
  std::vector<uint32_t> keys(4096);
  for (auto& k : keys) k = rng();
  size_t i = 0;
  for (auto _ : state) {
    const uint32_t k = keys[i++ & 4095];
    benchmark::DoNotOptimize(spintune_lookup(&t, k & 3, (k >> 2) & 15, 1u << ((k >> 6) & 15)));
  }
  state.counters["entries"] = static_cast<double>(entries.size());
}
BENCHMARK(BM_Lookup);

int Ready(int) { return 1; }

void BM_LookupAndOneSpinCheck(benchmark::State& state) {
  const auto entries = Entries();
  spintune_table t{entries.data(), static_cast<uint32_t>(entries.size()), 1, "bench"};
  uint32_t op = 0;
  for (auto _ : state) {
    const spintune_entry* e = spintune_lookup(&t, 1, op++ & 15, 4096);
    int val = 0;
    benchmark::DoNotOptimize(
        spintune_wait_atomic(e, Ready, val, val, (spintune_wait_stats*)nullptr, 0));
  }
}
BENCHMARK(BM_LookupAndOneSpinCheck);

void BM_ParseFullBlob(benchmark::State& state) {
  // A maximum-size blob built by hand (1024 entries).
  const uint32_t count = SPINTUNE_MAX_ENTRIES;
  std::vector<uint8_t> b(SPINTUNE_BLOB_HEADER_BYTES + count * SPINTUNE_BLOB_ENTRY_BYTES);
  auto put32 = [&](size_t at, uint32_t v) {
    for (int k = 0; k < 4; ++k) b[at + k] = static_cast<uint8_t>(v >> (8 * k));
  };
  put32(0, SPINTUNE_BLOB_MAGIC);
  b[4] = 1;
  b[6] = SPINTUNE_BLOB_HEADER_BYTES;
  put32(8, static_cast<uint32_t>(b.size()));
  put32(24, count);
  b[28] = SPINTUNE_BLOB_ENTRY_BYTES;
  b[32] = 'd';
  for (uint32_t i = 0; i < count; ++i) {
    const size_t at = SPINTUNE_BLOB_HEADER_BYTES + i * SPINTUNE_BLOB_ENTRY_BYTES;
    const bool last = i + 1 == count;
    b[at] = last ? 0xFF : 0;
    b[at + 1] = last ? 0xFF : 10;
    b[at + 2] = last ? SPINTUNE_IRQ : SPINTUNE_SPIN_THEN_IRQ;
    b[at + 3] = last ? SPINTUNE_ENTRY_FALLBACK : 0;
    put32(at + 4, last ? 0xFFFFFFFFu : i);
    put32(at + 8, last ? 0 : 1000);
  }
  put32(12, spintune_crc32(0, b.data() + 16, b.size() - 16));
  std::vector<spintune_entry> storage(count);
  for (auto _ : state) {
    spintune_table t;
    benchmark::DoNotOptimize(spintune_blob_parse(b.data(), b.size(), storage.data(), count, &t));
  }
}
BENCHMARK(BM_ParseFullBlob);

}  // namespace

int main(int argc, char** argv) {
  spintune::RatioReporter r;
  spintune::RunBenchmarks(argc, argv, &r);
  const double clock_ns = r.CpuNs("BM_ClockGettime");
  std::printf("\nAgainst one clock_gettime(CLOCK_MONOTONIC) (%.1f ns here):\n", clock_ns);
  r.PrintRatio("BM_Lookup / BM_ClockGettime", r.CpuNs("BM_Lookup"), clock_ns, 0.25);
  r.PrintRatio("BM_LookupAndOneSpinCheck / BM_ClockGettime",
               r.CpuNs("BM_LookupAndOneSpinCheck"), clock_ns, 1.5);
  return 0;
}
