#include "bench/peer_policies.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace spintune {
namespace {

// --- Karlin et al.: deterministic threshold T = B (2-competitive) and the
// randomized threshold with density e^(t/B) / (B (e - 1)) on [0, B]
// (e/(e-1)-competitive), B = irq_cpu + lambda * irq_wake.
class KarlinRandomized : public OnlinePolicy {
 public:
  KarlinRandomized(double b_ns, uint64_t seed) : b_ns_(b_ns), rng_(seed) {}
  std::string name() const override { return "karlin-rand"; }
  WaitParams Decide(uint32_t, uint64_t) override {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
    return WaitParams::SpinThenIrq(
        static_cast<uint64_t>(b_ns_ * std::log(1 + u * (std::exp(1.0) - 1))));
  }

 private:
  double b_ns_;
  std::mt19937_64 rng_;
};

// --- blk-mq hybrid polling, adaptive mode (io_poll_delay = 0), Linux 4.10 ..
// 6.3 (block/blk-mq.c blk_mq_poll_nsecs): sleep (mean + 1) / 2 of the
// previous 100 ms stats window of the request's bucket, then classic-poll;
// no sleep before the first window has samples. The stats record the
// observed completion time, oversleep included ("latency shelving").
class BlkMqHybrid : public OnlinePolicy {
 public:
  std::string name() const override { return "blk-mq-hybrid"; }
  bool adaptive() const override { return true; }
  WaitParams Decide(uint32_t, uint64_t) override {
    if (mean_ns_ < 0) return WaitParams::SleepThenSpin(0);  // classic poll
    return WaitParams::SleepThenSpin(static_cast<uint64_t>((mean_ns_ + 1) / 2));
  }
  void Observe(double, const WaitParams&, const RequestCost& cost, double now_ns) override {
    constexpr double kWindowNs = 100e6;  // blk_stat_activate_msecs(q->poll_cb, 100)
    if (window_end_ns_ < 0) window_end_ns_ = now_ns + kWindowNs;
    if (now_ns >= window_end_ns_) {
      if (count_ > 0) mean_ns_ = sum_ns_ / count_;
      sum_ns_ = count_ = 0;
      window_end_ns_ = now_ns + kWindowNs;
    }
    sum_ns_ += cost.latency_ns;
    count_ += 1;
  }

 private:
  double mean_ns_ = -1;
  double sum_ns_ = 0, count_ = 0;
  double window_end_ns_ = -1;
};

// --- io_uring hybrid IOPOLL (IORING_SETUP_HYBRID_IOPOLL, Linux 6.13,
// io_uring/rw.c io_hybrid_iopoll_delay): hybrid_poll_time starts at
// LLONG_MAX (no sleep); sleep hybrid_poll_time / 2 once, then poll; after
// each request runtime = completion - start - sleep_time, and the running
// minimum of runtime becomes hybrid_poll_time.
class IoUringHybrid : public OnlinePolicy {
 public:
  std::string name() const override { return "io_uring-hybrid"; }
  bool adaptive() const override { return true; }
  WaitParams Decide(uint32_t, uint64_t) override {
    if (poll_time_ns_ == kNone) return WaitParams::SleepThenSpin(0);
    return WaitParams::SleepThenSpin(static_cast<uint64_t>(poll_time_ns_ / 2));
  }
  void Observe(double, const WaitParams& used, const RequestCost& cost, double) override {
    const double runtime = cost.latency_ns - static_cast<double>(used.sleep_ns);
    if (runtime < poll_time_ns_) poll_time_ns_ = runtime;
  }

 private:
  static constexpr double kNone = std::numeric_limits<double>::max();
  double poll_time_ns_ = kNone;
};

// --- KVM halt polling (virt/kvm/kvm_main.c, x86 defaults): halt_poll_ns
// starts at 0; halt_poll_ns module max 200000, grow 2, grow_start 10000,
// shrink 0 (reset). After each wait of halt_ns: success keeps the window;
// halt_ns > max shrinks; a short halt the window missed grows it.
class KvmHaltPoll : public OnlinePolicy {
 public:
  std::string name() const override { return "kvm-halt-poll"; }
  bool adaptive() const override { return true; }
  WaitParams Decide(uint32_t, uint64_t) override {
    return window_ns_ > 0 ? WaitParams::SpinThenIrq(static_cast<uint64_t>(window_ns_))
                          : WaitParams::Irq();
  }
  void Observe(double x_ns, const WaitParams&, const RequestCost&, double) override {
    constexpr double kMax = 200000, kGrow = 2, kGrowStart = 10000, kShrink = 0;
    if (x_ns <= window_ns_) return;  // poll succeeded
    if (window_ns_ > 0 && x_ns > kMax) {
      window_ns_ = kShrink > 0 ? window_ns_ / kShrink : 0;
      if (window_ns_ < kGrowStart) window_ns_ = 0;
    } else if (window_ns_ < kMax && x_ns < kMax) {
      window_ns_ = std::max(window_ns_ * kGrow, kGrowStart);
      window_ns_ = std::min(window_ns_, kMax);
    }
  }

 private:
  double window_ns_ = 0;
};

// --- cpuidle-haltpoll guest governor (drivers/cpuidle/governors/haltpoll.c):
// guest_halt_poll_ns 200000, grow 2, shrink 2, grow_start 50000, shrink
// allowed. Poll up to poll_limit_ns, then halt; after a halt of block_ns,
// grow when poll_limit < block_ns <= 200 us, shrink when block_ns > 200 us.
class CpuidleHaltpoll : public OnlinePolicy {
 public:
  std::string name() const override { return "cpuidle-haltpoll"; }
  bool adaptive() const override { return true; }
  WaitParams Decide(uint32_t, uint64_t) override {
    return limit_ns_ > 0 ? WaitParams::SpinThenIrq(static_cast<uint64_t>(limit_ns_))
                         : WaitParams::Irq();
  }
  void Observe(double x_ns, const WaitParams&, const RequestCost&, double) override {
    constexpr double kMax = 200000, kGrow = 2, kShrink = 2, kGrowStart = 50000;
    if (x_ns <= limit_ns_) return;  // the poll caught it: no halt, no adjustment
    const double block_ns = x_ns - limit_ns_;
    if (limit_ns_ < block_ns && block_ns <= kMax) {
      limit_ns_ = std::min(std::max(limit_ns_ * kGrow, kGrowStart), kMax);
    } else if (block_ns > kMax) {
      limit_ns_ = limit_ns_ / kShrink;
    }
  }

 private:
  double limit_ns_ = 0;
};

// --- DPAS per-I/O adaptive sleep (PAS), FAST'26 artifact
// (blk_mq_poll_pas_nsecs): sleep `dur`, then poll. Outcome "over" = complete
// at the first poll after waking, "under" = more polling needed. From the
// last two outcomes: [over,over] adj -= dn; [over,under] adj = 1 + up;
// [under,over] adj = 1 - dn; [under,under] adj += up; dur *= adj, floored at
// d_init = 100 ns. Steps: up_init 0.01, dn_init 0.1, heat_up 0.05, cool_dn
// 0.1, min_dn 0.01, max_dn 0.1, updn_ratio 10. The step adaptation is our
// reading of the paper's description (agreeing outcomes heat the steps up,
// disagreeing ones cool them down); the artifact's exact code was not read.
class DpasPas : public OnlinePolicy {
 public:
  std::string name() const override { return "dpas-pas"; }
  bool adaptive() const override { return true; }
  WaitParams Decide(uint32_t, uint64_t) override {
    return WaitParams::SleepThenSpin(static_cast<uint64_t>(dur_ns_));
  }
  void Observe(double, const WaitParams& used, const RequestCost& cost, double) override {
    constexpr double kInitNs = 100, kHeatUp = 0.05, kCoolDn = 0.1, kMinDn = 0.01, kMaxDn = 0.1,
                     kRatio = 10;
    // Over: the wake came after completion (latency is exactly the sleep).
    const bool over = cost.latency_ns <= static_cast<double>(used.sleep_ns) + wake_ns_ + 0.5;
    if (has_last_) {
      if (last_over_ && over) adj_ -= dn_;
      if (last_over_ && !over) adj_ = 1 + up_;
      if (!last_over_ && over) adj_ = 1 - dn_;
      if (!last_over_ && !over) adj_ += up_;
      const bool agree = last_over_ == over;
      dn_ = std::clamp(dn_ * (agree ? 1 + kHeatUp : 1 - kCoolDn), kMinDn, kMaxDn);
      up_ = dn_ / kRatio;
      dur_ns_ = std::max(kInitNs, dur_ns_ * std::max(adj_, 0.0));
    }
    has_last_ = true;
    last_over_ = over;
  }
  explicit DpasPas(double timer_wake_ns) : wake_ns_(timer_wake_ns) {}

 private:
  double wake_ns_;
  double dur_ns_ = 100;  // d_init
  double adj_ = 1, up_ = 0.01, dn_ = 0.1;
  bool has_last_ = false, last_over_ = false;
};

// --- litex-mmc upstream heuristic (litex_mmc_send_cmd): IRQ when data is
// transferred (or R1b busy), else readx_poll_timeout with SD_SLEEP_US = 5.
class LitexUpstream : public OnlinePolicy {
 public:
  std::string name() const override { return "litex-upstream"; }
  WaitParams Decide(uint32_t, uint64_t bytes) override {
    return bytes > 0 ? WaitParams::Irq() : WaitParams::PollSleep(5'000);
  }
};

// --- mxs-mmc vendor kernel: "polling is used only for small chunks of <=
// 1024 bytes to save the context switches when using DMA" (seed 001).
class MxsMmcVendor : public OnlinePolicy {
 public:
  std::string name() const override { return "mxs-mmc-vendor"; }
  WaitParams Decide(uint32_t, uint64_t bytes) override {
    return bytes <= 1024 ? WaitParams::Spin(kTimeoutNs) : WaitParams::Irq();
  }
  static constexpr uint64_t kTimeoutNs = 10'000'000;
};

}  // namespace

std::vector<std::unique_ptr<OnlinePolicy>> MakePeerPolicies(const PeerContext& context) {
  const double b = context.costs.irq_cpu_ns + context.latency_weight * context.costs.irq_wake_ns;
  std::vector<std::unique_ptr<OnlinePolicy>> out;
  out.push_back(std::make_unique<StaticPolicy>("always-irq", WaitParams::Irq()));
  // SD_SLEEP_US 0: readx_poll_timeout without sleeping, SD_TIMEOUT_US 20000.
  out.push_back(std::make_unique<StaticPolicy>("always-spin", WaitParams::Spin(20'000'000)));
  // litex default SD_SLEEP_US 5 for every wait.
  out.push_back(std::make_unique<StaticPolicy>("poll-5us", WaitParams::PollSleep(5'000)));
  // paulusmack: "poll for about 100 to 150 microseconds. If that times out,
  // then enable the interrupt and call wait_for_completion()".
  out.push_back(std::make_unique<StaticPolicy>("spin-150us-irq", WaitParams::SpinThenIrq(150'000)));
  out.push_back(std::make_unique<StaticPolicy>(
      "karlin-det", WaitParams::SpinThenIrq(static_cast<uint64_t>(b))));
  out.push_back(std::make_unique<KarlinRandomized>(b, context.seed));
  out.push_back(std::make_unique<BlkMqHybrid>());
  out.push_back(std::make_unique<IoUringHybrid>());
  out.push_back(std::make_unique<KvmHaltPoll>());
  out.push_back(std::make_unique<CpuidleHaltpoll>());
  out.push_back(std::make_unique<DpasPas>(context.costs.timer_wake_ns));
  out.push_back(std::make_unique<LitexUpstream>());
  out.push_back(std::make_unique<MxsMmcVendor>());
  return out;
}

}  // namespace spintune
