#include "agent/knobs/ahci_sunxi_sim.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace spintune {
namespace {

// Peak: 129 MB/s at TXTS = RXTS = 3 with 12 KiB blocks (seed: bs=12K, 129).
constexpr double kPeakMbps = 129;
// Cost per DWORD c + o / 2^t with o / c = 3.727: 40 MB/s at t = 0, 129 at t = 3.
constexpr double kPerDword = 1.0;
constexpr double kPerTransaction = 3.7273;
constexpr double kNoiseSigma = 0.007;
constexpr double kSlowRunShare = 0.03;

double BurstMbps(uint32_t txts) {
  if (txts <= 3) {
    const double at3 = kPerDword + kPerTransaction / 8;
    return kPeakMbps * at3 / (kPerDword + kPerTransaction / static_cast<double>(1u << txts));
  }
  if (txts == 4) return 45;
  if (txts == 5) return 41;
  return 38;
}

double BlockFactor(uint64_t block_bytes) {
  const uint64_t k = block_bytes / 1024;
  if (k <= 4) return 120.0 / kPeakMbps;
  if (k <= 8) return 126.5 / kPeakMbps;
  if (k <= 12) return 1.0;
  if (k <= 16) return 126.3 / kPeakMbps;
  return 0.975;
}

}  // namespace

const std::vector<AhciSunxiBoard>& AhciSunxiBoards() {
  static const std::vector<AhciSunxiBoard> kBoards = {
      {"ahci-sunxi-a20-txts5-rxts6", 5, 6},
      {"ahci-sunxi-a20-txts4-rxts4", 4, 4},
      {"ahci-sunxi-a20-txts0-rxts0", 0, 0},
  };
  return kBoards;
}

const AhciSunxiBoard* FindAhciSunxiBoard(const std::string& name) {
  for (const auto& b : AhciSunxiBoards()) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

bool AhciSunxiDmaErrors(uint32_t txts, uint32_t rxts) { return txts >= 12 || rxts >= 12; }

double AhciSunxiWriteMbps(uint32_t txts, uint32_t rxts, uint64_t block_bytes) {
  const double rx = std::max(0.9, 1 - 0.015 * std::abs(static_cast<int>(rxts) - 3));
  double mbps = BurstMbps(txts) * rx * BlockFactor(block_bytes);
  if (AhciSunxiDmaErrors(txts, rxts)) mbps *= 0.5;  // retries
  return mbps;
}

double AhciSunxiReadMbps(uint32_t rxts) { return rxts == 0 ? 195 : 200; }

AhciSunxiSim::AhciSunxiSim(const AhciSunxiBoard& board, uint64_t seed)
    : p0dmacr_(kP0dmacrDriverBits | (board.rxts << kRxtsShift) | (board.txts << kTxtsShift)),
      rng_(seed) {}

AhciSunxiSim::Run AhciSunxiSim::Measure(uint64_t block_bytes) {
  const uint32_t txts = (p0dmacr_ >> kTxtsShift) & 0xf;
  const uint32_t rxts = (p0dmacr_ >> kRxtsShift) & 0xf;
  std::normal_distribution<double> noise(0, kNoiseSigma);
  std::uniform_real_distribution<double> u(0, 1);
  auto jitter = [&] {
    double f = std::exp(noise(rng_));
    if (u(rng_) < kSlowRunShare) f *= 0.85 + 0.10 * u(rng_);
    return f;
  };
  Run r;
  r.write_mbps = AhciSunxiWriteMbps(txts, rxts, block_bytes) * jitter();
  r.read_mbps = AhciSunxiReadMbps(rxts) * jitter();
  if (AhciSunxiDmaErrors(txts, rxts)) {
    std::poisson_distribution<uint64_t> errors(6);
    r.errors = 1 + errors(rng_);
  }
  return r;
}

}  // namespace spintune
