// BoardModel: a parametric simulated board (device + CPU) whose completion
// times and platform costs are calibrated from the field reports in
// ../shared/seeds (docs/boards.md gives every number's source).
//
// Completion time of one request, in ns:
//   X = device_ns + bytes * bus_ns_per_byte + cpu_cycles / f_cpu
// where device_ns is lognormal(device_median_ns, device_sigma), replaced
// with probability slow_share by lognormal(slow_median_ns, slow_sigma) (card
// garbage collection, erase, retries). Platform costs are cycles / f_cpu,
// except timer oversleep, which is tick-bound on boards without high
// resolution timers and given in ns.
//
// Plain data; thread-safe to read.
#ifndef SPINTUNE_AGENT_BOARD_MODEL_H_
#define SPINTUNE_AGENT_BOARD_MODEL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "models/cost_model.h"
#include "policy/default_rule.h"

namespace spintune {

struct SizeShare {
  uint64_t bytes = 0;
  double share = 1.0;
};

struct OpcodeModel {
  uint32_t opcode = 0;
  std::string name;                // "CMD18 READ_MULTIPLE_BLOCK"
  double share = 1.0;              // fraction of requests with this opcode
  std::vector<SizeShare> sizes;    // transfer lengths and their shares
  double device_median_ns = 0;     // device-side latency, median
  double device_sigma = 0.1;       // lognormal shape
  double slow_share = 0;           // probability of the slow mode
  double slow_median_ns = 0;
  double slow_sigma = 0.3;
  double bus_ns_per_byte = 0;      // data transfer time per byte
  double cpu_cycles = 0;           // part clocked by the CPU (CSR, gateware)
  double error_share = 0;          // requests that complete with an error
};

struct BoardModel {
  std::string name;         // "litex-rocket-50mhz-slowcard"
  std::string summary;      // one line for --list-boards
  std::string cpu_model;
  std::string cpu_class = "default";
  uint64_t cpu_khz = 0;
  std::string kernel_release;
  std::string device_name;  // key device, "mmc0"
  std::string driver;       // "litex-mmc"
  std::string device_model; // "SanDisk 32GB (slow)"
  // IRQ path in CPU cycles: everything but the handler, the handler, and
  // the wake latency (completion -> waiter running).
  double irq_overhead_cycles = 0;
  double irq_handler_cycles = 0;
  double irq_wake_cycles = 0;
  double poll_read_cycles = 0;
  double timer_cpu_cycles = 0;
  double timer_wake_ns = 0;  // mean oversleep of a short sleep
  std::vector<OpcodeModel> opcodes;
  std::vector<DefaultRule> default_rules;  // the stock driver's choice
  std::string sources;                     // seed file and what was used

  double CyclesToNs(double cycles) const { return cycles * 1e6 / static_cast<double>(cpu_khz); }
  // Platform costs of the model (what a perfect probe would measure).
  PlatformCosts Costs() const;
  double IrqOverheadNs() const { return CyclesToNs(irq_overhead_cycles); }
};

// One completion time of `op` with `bytes`, drawn with `rng`.
double DrawCompletionNs(const BoardModel& board, const OpcodeModel& op, uint64_t bytes,
                        std::mt19937_64& rng);

// Every simulated board, in documentation order.
const std::vector<BoardModel>& BoardCatalog();
// The board called `name`, or nullptr.
const BoardModel* FindBoard(const std::string& name);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_BOARD_MODEL_H_
