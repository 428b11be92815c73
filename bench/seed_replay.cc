#include "bench/seed_replay.h"

#include <cmath>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/board_model.h"
#include "cli/table_format.h"
#include "models/wait_optimizer.h"

namespace spintune {
namespace {

// CPU work per 4 KiB request outside the waits (file system, block layer,
// MMC core, cp), in cycles: from row 6 (spin everything) of the seed table,
// 2.13 ms at 50 MHz and 1.12 ms at 100 MHz minus the waits (docs/boards.md);
// NaxRiscv from its sleep-0 read, 0.90 ms minus the waits.
constexpr double kRocketCycles = 87'000;
constexpr double kNaxCycles = 66'700;

using Config = std::function<WaitParams(uint32_t opcode, uint64_t bytes)>;

// Mean latency of each opcode's wait under `config`, from samples of X.
double RequestTimeNs(const BoardModel& board, double other_cycles, bool write,
                     const Config& config) {
  std::mt19937_64 rng(5);
  const PlatformCosts costs = board.Costs();
  double total = board.CyclesToNs(other_cycles);
  for (const OpcodeModel& op : board.opcodes) {
    const bool used = op.opcode == 23 || (write ? (op.opcode == 25 || op.opcode == 13)
                                                : op.opcode == 18);
    if (!used) continue;
    const uint64_t bytes = op.sizes[0].bytes;
    const WaitParams w = config(op.opcode, bytes);
    double sum = 0;
    const int n = 4000;
    for (int i = 0; i < n; ++i) {
      sum += CostOfRequest(DrawCompletionNs(board, op, bytes, rng), w, costs).latency_ns;
    }
    total += sum / n;
  }
  return total;
}

// spintune's per-opcode choice on the board's samples (objective lambda).
Config SpintuneConfig(const BoardModel& board, double lambda) {
  std::map<uint32_t, WaitParams> chosen;
  std::mt19937_64 rng(6);
  for (const OpcodeModel& op : board.opcodes) {
    LatencyHistogram h;
    for (int i = 0; i < 20000; ++i) {
      h.Record(static_cast<uint64_t>(DrawCompletionNs(board, op, op.sizes[0].bytes, rng)));
    }
    OptimizerOptions o;
    o.objective = {lambda, false};
    auto r = OptimizeWait(WaitDistribution::FromHistogram(h), board.Costs(), o);
    chosen[op.opcode] = r.ok() ? r->params : WaitParams::Irq();
  }
  return [chosen](uint32_t opcode, uint64_t) { return chosen.at(opcode); };
}

std::string Kbs(double request_ns) { return absl::StrFormat("%.0f", 4096.0 / 1024 / (request_ns * 1e-9)); }

}  // namespace

std::string RenderSeedReplay() {
  const Config heuristic = [](uint32_t, uint64_t bytes) {
    return bytes > 0 ? WaitParams::Irq() : WaitParams::PollSleep(5'000);
  };
  const Config all_irq = [](uint32_t, uint64_t) { return WaitParams::Irq(); };
  const Config poll5 = [](uint32_t, uint64_t) { return WaitParams::PollSleep(5'000); };
  const Config poll0 = [](uint32_t, uint64_t) { return WaitParams::Spin(20'000'000); };

  struct Row {
    std::string config;
    Config wait;
    // Seed 000 KB/s: 50 slow rd, wr, 50 fast rd, wr, 100 slow rd, wr, 100 fast rd, wr.
    std::vector<std::string> measured;
  };
  std::vector<Row> rows = {
      {"1 f1557fa heuristic", heuristic, {"731", "696", "1212", "719", "964", "876", "2278", "1403"}},
      {"2 66074a0 all cmds IRQ", all_irq, {"678", "683", "1182", "620", "944", "765", "2127", "1168"}},
      {"3 b695cee all + data IRQ", all_irq, {"682", "661", "1139", "614", "949", "883", "2272", "1166"}},
      {"4 heuristic + data IRQ", heuristic, {"718", "676", "1169", "732", "968", "1090", "2434", "1384"}},
      {"5 poll, SD_SLEEP_US 5", poll5, {"1126", "184", "374", "---", "388", "191", "388", "328"}},
      {"6 poll, SD_SLEEP_US 0", poll0, {"829", "949", "1921", "---", "1017", "1435", "3668", "---"}},
  };
  const char* boards[] = {"litex-rocket-50mhz-slowcard", "litex-rocket-50mhz-fastcard",
                          "litex-rocket-100mhz-slowcard", "litex-rocket-100mhz-fastcard"};
  std::vector<std::vector<std::string>> table = {
      {"CONFIG (seed 000)", "50 slow rd", "wr", "50 fast rd", "wr", "100 slow rd", "wr",
       "100 fast rd", "wr"}};
  auto add = [&](const std::string& name, const Config& wait, const std::vector<std::string>* seed) {
    std::vector<std::string> line = {name};
    for (int b = 0; b < 4; ++b) {
      const BoardModel& board = *FindBoard(boards[b]);
      for (int write = 0; write < 2; ++write) {
        std::string cell = Kbs(RequestTimeNs(board, kRocketCycles, write, wait));
        if (seed) absl::StrAppend(&cell, " (", (*seed)[2 * b + write], ")");
        line.push_back(cell);
      }
    }
    table.push_back(std::move(line));
  };
  for (const Row& r : rows) add(r.config, r.wait, &r.measured);
  for (double lambda : {1.0, 10.0}) {
    std::vector<std::string> line = {absl::StrFormat("spintune (lambda %g)", lambda)};
    for (int b = 0; b < 4; ++b) {
      const BoardModel& board = *FindBoard(boards[b]);
      const Config st = SpintuneConfig(board, lambda);
      for (int write = 0; write < 2; ++write) {
        line.push_back(Kbs(RequestTimeNs(board, kRocketCycles, write, st)));
      }
    }
    table.push_back(std::move(line));
  }

  const BoardModel& nax = *FindBoard("litex-naxriscv-100mhz");
  std::vector<std::vector<std::string>> nax_table = {{"CONFIG (NaxRiscv)", "read", "write"}};
  const std::vector<std::tuple<std::string, Config, std::string, std::string>> nax_rows = {
      {"vanilla (heuristic)", heuristic, "936", "468"},
      {"vanilla + sleep 0", poll0, "4551", "2100"},
      {"b695cee (all IRQ)", all_irq, "3343", "1733"}};
  for (const auto& [name, wait, rd, wr] : nax_rows) {
    nax_table.push_back({name, Kbs(RequestTimeNs(nax, kNaxCycles, false, wait)) + " (" + rd + ")",
                         Kbs(RequestTimeNs(nax, kNaxCycles, true, wait)) + " (" + wr + ")"});
  }
  for (double lambda : {1.0, 10.0}) {
    const Config st = SpintuneConfig(nax, lambda);
    nax_table.push_back({absl::StrFormat("spintune (lambda %g)", lambda),
                         Kbs(RequestTimeNs(nax, kNaxCycles, false, st)),
                         Kbs(RequestTimeNs(nax, kNaxCycles, true, st))});
  }
  return "Seed replay: simulated KB/s of a 32 MiB copy (4 KiB requests), measured KB/s from\n"
         "the seed report in parentheses (--- = the run failed in the report).\n" +
         RenderColumns(table) + "\n" + RenderColumns(nax_table);
}

}  // namespace spintune
