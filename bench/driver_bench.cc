// Cost of the driver-side hot path, on tables of the maximum size parsed by
// the driver's own parser (spintune_table_parse(): entries, context nodes,
// key index): one lookup (the O(1) key index, and the binary search that
// tables without an index use); one lookup in context (every key with a
// full tree of depth 3, and the tree shapes the fits produce; random
// features); the context state's update for
// one command (spintune_ctx_issue() + spintune_ctx_done()); one lookup plus
// one spin check with the real clock (the condition already true); and
// parsing a full blob (once per pushed table). Issues 16 and 18 state the
// targets against one clock_gettime(CLOCK_MONOTONIC) and today's lookup,
// measured in the same run; the ratios are printed at the end.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "spintune/wait.h"

namespace {

// The reference of issue 18's targets: one clock read.
using spintune::BM_ClockGettime;
BENCHMARK(BM_ClockGettime);

void Put(std::string* b, size_t at, uint64_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) (*b)[at + k] = static_cast<char>(v >> (8 * k));
}

// A key's context tree: nodes in preorder; a child is a node of the tree
// (its index in `nodes`) or, with SPINTUNE_CHILD_LEAF, a leaf (its index
// among the key's leaves, left to right).
struct TreeNode {
  uint8_t feature;
  uint64_t threshold;
  uint32_t left, right;
};
using Shape = std::vector<TreeNode>;  // empty: one leaf, no tree
constexpr uint32_t kLeaf = SPINTUNE_CHILD_LEAF;

// Every key in a full tree of depth 3 (8 leaves): the root splits on
// prev_wait, its children on since_write, theirs on inflight.
const Shape kFullDepth3 = {{0, 100'000, 1, 4},          {1, 1'000'000, 2, 3},
                           {2, 2, kLeaf | 0, kLeaf | 1}, {2, 2, kLeaf | 2, kLeaf | 3},
                           {1, 1'000'000, 5, 6},         {2, 2, kLeaf | 4, kLeaf | 5},
                           {2, 2, kLeaf | 6, kLeaf | 7}};
// The shapes `spintune-bench --context` fits on the Markov-modulated boards
// (docs/benchmarks.md): one split on prev_wait; two on prev_wait (three
// leaves, depth 2); since_write, then prev_wait on each side (four leaves).
const std::vector<Shape> kFittedShapes = {
    {{0, 480'000, kLeaf | 0, kLeaf | 1}},
    {{0, 610'000, kLeaf | 0, 1}, {0, 790'000, kLeaf | 1, kLeaf | 2}},
    {{1, 500'000, 1, 2}, {0, 460'000, kLeaf | 0, kLeaf | 1}, {0, 550'000, kLeaf | 2, kLeaf | 3}},
};

// A format 2 blob: `keys` keys (cpu class, opcode, size class) in order,
// key k with the tree shapes[k % shapes.size()], then the fallback.
std::string Blob(const std::vector<uint64_t>& keys, const std::vector<Shape>& shapes) {
  size_t count = 1, nodes = 0;
  for (size_t k = 0; k < keys.size(); ++k) {
    const size_t n = shapes[k % shapes.size()].size();
    count += n + 1;
    nodes += n;
  }
  const size_t header = SPINTUNE_BLOB_HEADER_V2_BYTES;
  std::string b(header + count * SPINTUNE_BLOB_ENTRY_BYTES + nodes * SPINTUNE_BLOB_NODE_BYTES,
                '\0');
  Put(&b, 0, SPINTUNE_BLOB_MAGIC, 4);
  Put(&b, 4, SPINTUNE_BLOB_VERSION, 2);
  Put(&b, 6, header, 2);
  Put(&b, 8, b.size(), 4);
  Put(&b, 24, count, 4);
  Put(&b, 28, SPINTUNE_BLOB_ENTRY_BYTES, 2);
  b[32] = 'd';
  Put(&b, 64, nodes, 4);
  Put(&b, 68, SPINTUNE_BLOB_NODE_BYTES, 2);
  b[70] = 1;
  Put(&b, 72, 1, 4);  // opcode 1 writes
  size_t row = 0, node = 0;
  const size_t nodes_at = header + count * SPINTUNE_BLOB_ENTRY_BYTES;
  for (size_t k = 0; k < keys.size(); ++k) {
    const uint64_t key = keys[k];
    const Shape& shape = shapes[k % shapes.size()];
    const size_t first_row = row, root = node;
    for (size_t l = 0; l <= shape.size(); ++l, ++row) {
      const size_t at = header + row * SPINTUNE_BLOB_ENTRY_BYTES;
      b[at] = static_cast<char>(key >> 40);
      b[at + 1] = static_cast<char>(key & 0xFF);
      b[at + 2] = SPINTUNE_SPIN_THEN_IRQ;
      Put(&b, at + 4, (key >> 8) & 0xFFFFFFFF, 4);
      Put(&b, at + 8, 5000 + 100 * l, 4);
      if (!shape.empty()) Put(&b, at + 20, root + 1, 2);
    }
    for (const TreeNode& n : shape) {
      const size_t at = nodes_at + node++ * SPINTUNE_BLOB_NODE_BYTES;
      auto child = [&](uint32_t c) {
        return c & kLeaf ? kLeaf | (first_row + (c & ~kLeaf)) : root + c;
      };
      b[at] = static_cast<char>(n.feature);
      Put(&b, at + 2, child(n.left), 2);
      Put(&b, at + 4, child(n.right), 2);
      Put(&b, at + 8, n.threshold, 8);
    }
  }
  const size_t at = header + row * SPINTUNE_BLOB_ENTRY_BYTES;
  b[at] = static_cast<char>(SPINTUNE_ANY_CPU_CLASS);
  b[at + 1] = static_cast<char>(SPINTUNE_ANY_SIZE_CLASS);
  b[at + 2] = SPINTUNE_IRQ;
  b[at + 3] = SPINTUNE_ENTRY_FALLBACK;
  Put(&b, at + 4, SPINTUNE_ANY_OPCODE, 4);
  Put(&b, 12, spintune_crc32(0, reinterpret_cast<const uint8_t*>(b.data()) + 16, b.size() - 16),
      4);
  return b;
}

// 16 opcodes x 16 size classes x 4 CPU classes (1,024 keys: the 1,025-entry
// table of the maximum size), or the first `n` of them.
std::vector<uint64_t> Keys(size_t n) {
  std::vector<uint64_t> keys;
  for (uint64_t cpu = 0; cpu < 4; ++cpu) {
    for (uint64_t op = 0; op < 16; ++op) {
      for (uint64_t sc = 0; sc < 16; ++sc) {
        if (keys.size() < n) keys.push_back(spintune__entry_key(cpu, op, sc));
      }
    }
  }
  return keys;
}

struct Parsed {
  std::vector<uint64_t> storage = std::vector<uint64_t>(SPINTUNE_TABLE_STORAGE_WORDS);
  spintune_table table{};

  explicit Parsed(const std::string& blob) {
    if (spintune_table_parse(blob.data(), blob.size(), storage.data(), storage.size() * 8,
                             &table, nullptr) != 0) {
      std::abort();
    }
  }
};

const Parsed& Plain() {
  static const Parsed p(Blob(Keys(SPINTUNE_MAX_ENTRIES - 1), {Shape{}}));
  return p;
}

// The 127 keys of 8 leaves each that fill a table.
const Parsed& WithContext() {
  static const Parsed p(Blob(Keys((SPINTUNE_MAX_ENTRIES - 1) / 8), {kFullDepth3}));
  return p;
}

// 340 keys of 2, 3 and 4 leaves (1,020 entries with the fallback).
const Parsed& WithFittedContext() {
  static const Parsed p(Blob(Keys(340), kFittedShapes));
  return p;
}

// Random commands of the plain table's keys (all hit), as before.
struct Command {
  uint8_t cpu;
  uint32_t opcode;
  uint64_t bytes;
};
std::vector<Command> Commands(size_t keys) {
  std::mt19937 rng(1);
  std::vector<Command> v(4096);
  for (auto& c : v) {
    const uint32_t k = rng() % static_cast<uint32_t>(keys);
    c = {static_cast<uint8_t>(k / 256), (k / 16) % 16, (1u << (k % 16)) >> 1};
  }
  return v;
}

void BM_Lookup(benchmark::State& state) {
  const spintune_table& t = Plain().table;
  const auto commands = Commands(t.count - 1);
  size_t i = 0;
  for (auto _ : state) {
    const Command& c = commands[i++ & 4095];
    benchmark::DoNotOptimize(spintune_lookup(&t, c.cpu, c.opcode, c.bytes));
  }
  state.counters["entries"] = t.count;
}
BENCHMARK(BM_Lookup);

// A driver that honours A/B trials (issue 12): the lookup, then
// spintune_ab_pick() on an entry without a trial (one load and a branch).
void BM_LookupAbPick(benchmark::State& state) {
  const spintune_table& t = Plain().table;
  const auto commands = Commands(t.count - 1);
  spintune_ab ab;
  spintune_ab_init(&ab, &t);
  size_t i = 0;
  for (auto _ : state) {
    const Command& c = commands[i++ & 4095];
    benchmark::DoNotOptimize(
        spintune_ab_pick(&t, spintune_lookup(&t, c.cpu, c.opcode, c.bytes), &ab));
  }
}
BENCHMARK(BM_LookupAbPick);

// The lookup of tables without an index (headers generated before format
// 2): the binary search of every lookup before issue 18.
void BM_LookupBinarySearch(benchmark::State& state) {
  spintune_table t = Plain().table;
  t.index = {};
  const auto commands = Commands(t.count - 1);
  size_t i = 0;
  for (auto _ : state) {
    const Command& c = commands[i++ & 4095];
    benchmark::DoNotOptimize(spintune_lookup(&t, c.cpu, c.opcode, c.bytes));
  }
}
BENCHMARK(BM_LookupBinarySearch);

// Lookups in context on `parsed`, `keys` keys: the features vary per
// command (prev_wait below `prev_wait_ns`, since_write below 2 ms, 0-3 in
// flight) so that every leaf is taken and the comparisons are not
// predictable.
void LookupCtx(benchmark::State& state, const Parsed& parsed, size_t keys,
               uint64_t prev_wait_ns) {
  const spintune_table& t = parsed.table;
  const auto commands = Commands(keys);
  std::mt19937_64 rng(2);
  std::vector<spintune_features> features(4096);
  for (size_t k = 0; k < features.size(); ++k) {
    features[k] = {{rng() % prev_wait_ns, rng() % 2'000'000, rng() % 4, commands[k].bytes}};
  }
  size_t i = 0;
  for (auto _ : state) {
    const size_t k = i++ & 4095;
    benchmark::DoNotOptimize(
        spintune_lookup_ctx(&t, commands[k].cpu, commands[k].opcode, &features[k]));
  }
  state.counters["entries"] = t.count;
  state.counters["nodes"] = t.node_count;
}

// The worst case: every key has a full tree of depth 3.
void BM_LookupCtx(benchmark::State& state) {
  LookupCtx(state, WithContext(), (WithContext().table.count - 1) / 8, 200'000);
}
BENCHMARK(BM_LookupCtx);

// The trees the context fits produce: depth 1 or 2, 2-4 leaves.
void BM_LookupCtxFitted(benchmark::State& state) {
  LookupCtx(state, WithFittedContext(), 340, 1'200'000);
}
BENCHMARK(BM_LookupCtxFitted);

// The context state of one command: its features at issue, the update at
// completion (no clock read: the driver has the times).
void BM_CtxIssueAndDone(benchmark::State& state) {
  spintune_ctx ctx{};
  uint64_t now = 1'000'000;
  for (auto _ : state) {
    spintune_features f;
    spintune_ctx_issue(&ctx, now, 4096, &f);
    benchmark::DoNotOptimize(f);
    spintune_ctx_done(&ctx, now, now + 50'000, (now & 0x100) != 0);
    now += 60'001;
  }
}
BENCHMARK(BM_CtxIssueAndDone);

int Ready(int) { return 1; }

void BM_LookupAndOneSpinCheck(benchmark::State& state) {
  const spintune_table& t = Plain().table;
  uint32_t op = 0;
  for (auto _ : state) {
    const spintune_entry* e = spintune_lookup(&t, 1, op++ & 15, 4096);
    int val = 0;
    benchmark::DoNotOptimize(
        spintune_wait_atomic(e, Ready, val, val, (spintune_wait_stats*)nullptr, 0));
  }
}
BENCHMARK(BM_LookupAndOneSpinCheck);

// Validate a full blob and build its key index, once per pushed table.
void BM_ParseFullBlob(benchmark::State& state) {
  const std::string blob = Blob(Keys(SPINTUNE_MAX_ENTRIES - 1), {Shape{}});
  std::vector<uint64_t> storage(SPINTUNE_TABLE_STORAGE_WORDS);
  for (auto _ : state) {
    spintune_table t;
    benchmark::DoNotOptimize(spintune_table_parse(blob.data(), blob.size(), storage.data(),
                                                  storage.size() * 8, &t, nullptr));
  }
}
BENCHMARK(BM_ParseFullBlob);

}  // namespace

int main(int argc, char** argv) {
  spintune::RatioReporter r;
  spintune::RunBenchmarks(argc, argv, &r);
  const double clock_ns = r.CpuNs("BM_ClockGettime");
  const double lookup_ns = r.CpuNs("BM_Lookup");
  std::printf("\nAgainst one clock_gettime(CLOCK_MONOTONIC) (%.1f ns here) and the lookup:\n",
              clock_ns);
  r.PrintRatio("BM_Lookup / BM_ClockGettime", lookup_ns, clock_ns, 0.25);
  r.PrintRatio("BM_LookupAndOneSpinCheck / BM_ClockGettime",
               r.CpuNs("BM_LookupAndOneSpinCheck"), clock_ns, 1.5);
  r.PrintRatio("BM_LookupCtx / BM_Lookup", r.CpuNs("BM_LookupCtx"), lookup_ns, 2.0);
  r.PrintRatio("BM_LookupCtxFitted / BM_Lookup", r.CpuNs("BM_LookupCtxFitted"), lookup_ns, 2.0);
  r.PrintRatio("BM_LookupCtx / BM_LookupBinarySearch", r.CpuNs("BM_LookupCtx"),
               r.CpuNs("BM_LookupBinarySearch"), 2.0);
  r.PrintRatio("BM_CtxIssueAndDone / BM_ClockGettime", r.CpuNs("BM_CtxIssueAndDone"), clock_ns,
               0);
  r.PrintRatio("BM_LookupBinarySearch / BM_Lookup", r.CpuNs("BM_LookupBinarySearch"), lookup_ns,
               0);
  return 0;
}
