// KnobDeclaration: the knobs an agent offers for experiments, how it sets
// and reads each one, what one trial measures and what counts as better.
// Agents read it from a JSON file (`spintune-agent --knobs FILE`, format in
// docs/knobs.md) or take a simulated board's (`--knobs sim:BOARD`).
//
// Plain values and pure functions; thread-safe.
#ifndef SPINTUNE_AGENT_KNOBS_KNOB_DECLARATION_H_
#define SPINTUNE_AGENT_KNOBS_KNOB_DECLARATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/io_load.h"

namespace spintune {

// How a knob's raw value is read and written.
struct KnobAccess {
  enum class Kind { kFile, kCommand, kSim };
  Kind kind = Kind::kFile;
  // kFile: a sysfs attribute or module parameter ("[x] y" enum lists work).
  std::string path;
  // kCommand: `read` prints the value (decimal or 0x hex); `write` is run
  // with {value} replaced by it (a register through devmem, i2cset...).
  std::string read_command;
  std::string write_command;
  std::string Describe() const;
};

struct KnobFieldSpec {
  std::string name;   // "TXTS"
  uint32_t shift = 0;
  uint32_t width = 0;  // 1..32
  std::vector<int64_t> values;  // candidates (default: all 2^width)
};

struct KnobSpec {
  std::string name;  // "nr_requests", "P0DMACR"
  KnobAccess access;
  // Exactly one domain: integer candidates, enum labels, or register fields.
  std::vector<int64_t> values;
  std::vector<std::string> labels;
  std::vector<KnobFieldSpec> fields;
  std::string unit;
  bool is_enum() const { return !labels.empty(); }
  bool is_register() const { return !fields.empty(); }
};

struct WorkloadSpec {
  enum class Kind { kIoLoad, kCommand, kSim };
  Kind kind = Kind::kIoLoad;
  IoLoadOptions ioload;        // kIoLoad (its duration is the window)
  std::string command;         // kCommand: prints name=value pairs
  double timeout_seconds = 300;  // kCommand
  uint64_t block_bytes = 0;    // kSim: dd's bs
  std::string Describe() const;
};

struct KnobConstraintSpec {
  std::string metric;
  std::optional<double> min;
  std::optional<double> max;
};

struct KnobDeclaration {
  std::string name;  // of the knob set, unique per agent ("vda-queue")
  // What a knob-only agent (no --source) tells the tuner it is.
  std::string board;
  std::string device;
  std::string driver;
  std::vector<KnobSpec> knobs;
  WorkloadSpec workload;
  std::string metric;  // "mib_per_s", "write_mbps"
  std::string metric_unit;
  bool lower_is_better = false;
  std::vector<KnobConstraintSpec> constraints;
  uint32_t max_trials = 0;   // 0: the tuner's default
  bool apply_winner = true;  // false: always restore the start values
  uint64_t seed = 0;         // of the trial order (0: the tuner picks)
  // kSim: the simulated board ("ahci-sunxi-a20-txts5-rxts6").
  std::string sim_board;
};

// InvalidArgument naming the field for anything wrong.
absl::StatusOr<KnobDeclaration> ParseKnobDeclaration(const std::string& json_text);
// "sim:BOARD" (a simulated ahci_sunxi board, ahci_sunxi_sim.h) or a JSON file.
absl::StatusOr<KnobDeclaration> LoadKnobDeclaration(const std::string& spec);
// The simulated board's declaration: P0DMACR.TXTS/RXTS (16 values each),
// sequential write MB/s at 12 KiB blocks, DMA errors must stay 0.
absl::StatusOr<KnobDeclaration> SimKnobDeclaration(const std::string& board);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_KNOBS_KNOB_DECLARATION_H_
