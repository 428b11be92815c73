// The simulated ahci_sunxi board: an Allwinner A20 (2x Cortex-A7 @ 1 GHz)
// with a SATA SSD, whose write throughput depends on the undocumented DMA
// transaction-size fields of its port DMA control register, calibrated to
// field report 003 (../shared/seeds/003_3a607bcba241bd84.txt; docs/knobs.md
// derives every number).
//
// P0DMACR (offset 0x170): bits 0-3 TXTS, 4-7 RXTS, 8-11 TXABL, 12-15 RXABL.
// The stock driver sets only TXABL/RXABL (clrsetbits 0xff00 -> 0x4400), so
// TXTS/RXTS keep whatever the boot firmware left: the seed saw 5/6, 4/4 and
// 0/0 on different boards, all writing 36-45 MB/s; 3/3 writes 120-129 MB/s.
//
// Model (expected write MB/s of a dd-style sequential write):
//   TXTS t <= 3: a transaction of 2^t DWORDs costs c + o / 2^t per DWORD,
//     with o / c fitted to 40 MB/s at t = 0 and 129 MB/s at t = 3 (so
//     t = 1, 2 give 66 and 98);
//   TXTS 4..11: longer than the AHB burst: split into single transfers,
//     45 (t = 4), 41 (t = 5), 38 (t >= 6) MB/s;
//   TXTS >= 12 or RXTS >= 12: FIFO overruns, errors (not in the seed: an
//     invented hazard so that experiments meet a constraint);
//   RXTS r (the receive side shares the bus): x (1 - 1.5% |r - 3|), at
//     most -10%;
//   block size b: x 0.93 (4K), 0.98 (8K), 1.0 (12K), 0.979 (16K), 0.975
//     above (the seed's 120 / 127 / 129 / 126 MB/s);
//   reads ~200 MB/s (the seed), RXTS 0 -2.5%.
// Run-to-run noise: lognormal, sigma 0.7% (the seed's three dd repeats per
// block size), plus a 3% chance of a run 5-15% slower (background
// writeback; invented).
//
// Thread-compatible: one AhciSunxiSim per thread.
#ifndef SPINTUNE_AGENT_KNOBS_AHCI_SUNXI_SIM_H_
#define SPINTUNE_AGENT_KNOBS_AHCI_SUNXI_SIM_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace spintune {

// One simulated board: its name and the TXTS/RXTS its firmware leaves.
struct AhciSunxiBoard {
  std::string name;  // "ahci-sunxi-a20-txts5-rxts6"
  uint32_t txts = 0;
  uint32_t rxts = 0;
};

// The three leftovers of the seed, in its order (5/6, 4/4, 0/0).
const std::vector<AhciSunxiBoard>& AhciSunxiBoards();
// The board called `name`, or nullptr.
const AhciSunxiBoard* FindAhciSunxiBoard(const std::string& name);

inline constexpr uint32_t kP0dmacrOffset = 0x170;
inline constexpr uint32_t kTxtsShift = 0, kRxtsShift = 4, kFieldWidth = 4;
// TXABL = RXABL = 4, as the stock driver sets them.
inline constexpr uint32_t kP0dmacrDriverBits = 0x4400;
inline constexpr uint64_t kDefaultBlockBytes = 12 * 1024;  // the seed's best

// Expected values, no noise.
double AhciSunxiWriteMbps(uint32_t txts, uint32_t rxts, uint64_t block_bytes);
double AhciSunxiReadMbps(uint32_t rxts);
bool AhciSunxiDmaErrors(uint32_t txts, uint32_t rxts);

class AhciSunxiSim {
 public:
  AhciSunxiSim(const AhciSunxiBoard& board, uint64_t seed);

  uint32_t ReadP0dmacr() const { return p0dmacr_; }
  void WriteP0dmacr(uint32_t value) { p0dmacr_ = value; }

  struct Run {
    double write_mbps = 0;
    double read_mbps = 0;
    uint64_t errors = 0;  // DMA errors during the run
  };
  // One measured dd-style write and read run with the register as it is.
  Run Measure(uint64_t block_bytes);

 private:
  uint32_t p0dmacr_;
  std::mt19937_64 rng_;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_KNOBS_AHCI_SUNXI_SIM_H_
