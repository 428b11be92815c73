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
// Requests go one at a time (an MMC host, a SPI bus): each is issued
// think_ns (exponential mean) after the previous one completed. Boards with
// a Modulation are Markov-modulated (issue 16): a hidden busy state (card
// garbage collection) comes in episodes, and reads right after a write are
// slower; the calibrated boards are i.i.d.
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

// Markov modulation of a board's stream (docs/boards.md). A hidden
// two-state chain advances at every command of the device: busy episodes
// (garbage collection) last busy_run_commands commands on average and hold
// busy_share of all commands. In an episode, opcodes with a slow mode take
// it (outside, the fast one: the slow mode's long-run share is busy_share)
// and the others wait busy_extra_ns longer (lognormal, sigma 0.3). Reads
// (read_opcodes) issued within after_write_window_ns of the completion of
// the device's last write (write_opcodes) wait after_write_extra_ns longer
// (lognormal, sigma 0.3). busy_share 0 and after_write_window_ns 0: i.i.d.
struct Modulation {
  double busy_share = 0;
  double busy_run_commands = 1;
  double busy_extra_ns = 0;
  double after_write_window_ns = 0;
  double after_write_extra_ns = 0;
  std::vector<uint32_t> read_opcodes;
  std::vector<uint32_t> write_opcodes;

  bool modulated() const { return busy_share > 0 || after_write_window_ns > 0; }
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
  double think_ns = 50'000;  // completion -> next issue, exponential mean
  Modulation modulation;

  double CyclesToNs(double cycles) const { return cycles * 1e6 / static_cast<double>(cpu_khz); }
  // Platform costs of the model (what a perfect probe would measure).
  PlatformCosts Costs() const;
  double IrqOverheadNs() const { return CyclesToNs(irq_overhead_cycles); }
};

// One completion time of `op` with `bytes`, drawn with `rng` (the slow mode
// with probability op.slow_share).
double DrawCompletionNs(const BoardModel& board, const OpcodeModel& op, uint64_t bytes,
                        std::mt19937_64& rng);

// One simulated request.
struct SimRequest {
  const OpcodeModel* op = nullptr;
  uint64_t bytes = 0;
  uint64_t issue_ns = 0;  // on the board's clock, from 0
  double x_ns = 0;        // completion time
  bool error = false;
  bool busy = false;      // issued in a busy episode (modulated boards)
};

// The board's request stream in issue order. Draws from `rng` exactly as
// the i.i.d. model always has (opcode, size, completion time, error), so a
// calibrated board's samples do not depend on the timeline; the issue times
// and the modulation's chain use their own generators seeded from `seed`.
// `rng` must outlive the simulator. Thread-compatible.
class BoardSimulator {
 public:
  BoardSimulator(const BoardModel& board, uint64_t seed, std::mt19937_64* rng);
  SimRequest Next();

 private:
  const BoardModel& board_;
  std::mt19937_64* rng_;
  std::mt19937_64 timeline_rng_;
  std::mt19937_64 chain_rng_;
  std::discrete_distribution<size_t> pick_opcode_;
  std::vector<std::discrete_distribution<size_t>> pick_size_;
  double now_ns_ = 0;
  bool busy_ = false;
  bool wrote_ = false;
  double last_write_done_ns_ = 0;
};

// Every simulated board, in documentation order; the Markov-modulated ones
// (Modulation::modulated()) are named "...-gc".
const std::vector<BoardModel>& BoardCatalog();
// The board called `name`, or nullptr.
const BoardModel* FindBoard(const std::string& name);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_BOARD_MODEL_H_
