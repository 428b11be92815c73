// OnlineTuner: spintune deciding request by request on a stream whose
// distribution may shift: a sliding window of recent completion times, a
// refit every `refit_every` samples, change detection that drops the
// samples from before a shift, and hysteresis so the decision only changes
// for a real gain. The tuner applies the same three rules per key.
//
//   until the first fit: SPIN_THEN_IRQ(B), Karlin's 2-competitive threshold
//   refits after 64, 128, ... samples, then every refit_every samples:
//     if KS(window minus the last detect_samples, last detect_samples) shows
//        a change (change_detector.h): keep only the samples after the most
//        likely change point (the split of the recent block, in steps of 64,
//        with the largest KS distance)
//     fit = OptimizeWait(window)
//     adopt fit if J_window(fit) < (1 - hysteresis) * J_window(current), or
//        the current wait breaks the latency cap, or nothing was fitted yet
//
// Thread-safety: one instance per thread.
#ifndef SPINTUNE_BENCH_ONLINE_TUNER_H_
#define SPINTUNE_BENCH_ONLINE_TUNER_H_

#include <deque>

#include "models/change_detector.h"
#include "bench/online_policy.h"
#include "models/wait_optimizer.h"

namespace spintune {

struct OnlineTunerOptions {
  OptimizerOptions optimizer;
  size_t min_samples = 64;       // before the first fit: T = B
  size_t refit_every = 128;
  size_t window = 4096;          // most samples kept
  size_t detect_samples = 512;   // recent block tested against the rest
  ChangeTest change;
  double hysteresis = 0.01;      // relative gain needed to switch
};

class OnlineTuner : public OnlinePolicy {
 public:
  OnlineTuner(const PlatformCosts& costs, OnlineTunerOptions options);

  std::string name() const override { return "spintune-online"; }
  bool adaptive() const override { return true; }
  WaitParams Decide(uint32_t, uint64_t) override { return current_; }
  void Observe(double x_ns, const WaitParams&, const RequestCost&, double) override;

  const WaitParams& current() const { return current_; }
  int changes_detected() const { return changes_; }

 private:
  void Refit();

  PlatformCosts costs_;
  OnlineTunerOptions options_;
  std::deque<uint64_t> window_;
  size_t since_refit_ = 0;
  size_t next_refit_ = 64;  // doubles up to refit_every
  bool fitted_ = false;
  int changes_ = 0;
  WaitParams current_ = WaitParams::Irq();
};

}  // namespace spintune

#endif  // SPINTUNE_BENCH_ONLINE_TUNER_H_
