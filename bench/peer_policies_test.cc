#include "bench/peer_policies.h"

#include <cmath>
#include <map>

#include "gtest/gtest.h"

namespace spintune {
namespace {

const PlatformCosts kCosts{20'000, 30'000, 100, 2'000, 50'000};

std::map<std::string, std::unique_ptr<OnlinePolicy>> Peers() {
  std::map<std::string, std::unique_ptr<OnlinePolicy>> m;
  for (auto& p : MakePeerPolicies({kCosts, 1.0, 1})) m[p->name()] = std::move(p);
  return m;
}

void Step(OnlinePolicy* p, double x, double* now) {
  const WaitParams w = p->Decide(0, 0);
  const RequestCost c = CostOfRequest(x, w, kCosts);
  *now += c.latency_ns;
  p->Observe(x, w, c, *now);
}

TEST(PeerPolicies, AllThirteenArePresent) {
  auto peers = Peers();
  EXPECT_EQ(peers.size(), 13u);
  for (const char* n : {"always-irq", "always-spin", "poll-5us", "spin-150us-irq", "karlin-det",
                        "karlin-rand", "blk-mq-hybrid", "io_uring-hybrid", "kvm-halt-poll",
                        "cpuidle-haltpoll", "dpas-pas", "litex-upstream", "mxs-mmc-vendor"}) {
    EXPECT_TRUE(peers.count(n)) << n;
  }
}

TEST(PeerPolicies, KvmGrowsFromTenMicrosDoublesAndResetsOnLongHalts) {
  auto peers = Peers();
  OnlinePolicy* kvm = peers["kvm-halt-poll"].get();
  double now = 0;
  EXPECT_EQ(kvm->Decide(0, 0), WaitParams::Irq());
  Step(kvm, 50'000, &now);  // short halt missed: grow to grow_start 10 us
  EXPECT_EQ(kvm->Decide(0, 0), WaitParams::SpinThenIrq(10'000));
  Step(kvm, 50'000, &now);  // x2
  EXPECT_EQ(kvm->Decide(0, 0), WaitParams::SpinThenIrq(20'000));
  Step(kvm, 50'000, &now);
  Step(kvm, 50'000, &now);  // 40 -> 80 us, which catches 50 us
  EXPECT_EQ(kvm->Decide(0, 0), WaitParams::SpinThenIrq(80'000));
  Step(kvm, 50'000, &now);  // success: unchanged
  EXPECT_EQ(kvm->Decide(0, 0), WaitParams::SpinThenIrq(80'000));
  Step(kvm, 300'000, &now);  // longer than the 200 us cap: shrink 0 resets
  EXPECT_EQ(kvm->Decide(0, 0), WaitParams::Irq());
}

TEST(PeerPolicies, IoUringSleepsHalfTheRunningMinimum) {
  auto peers = Peers();
  OnlinePolicy* p = peers["io_uring-hybrid"].get();
  double now = 0;
  EXPECT_EQ(p->Decide(0, 0), WaitParams::SleepThenSpin(0));  // first: classic poll
  Step(p, 100'000, &now);  // runtime 100 us
  EXPECT_EQ(p->Decide(0, 0), WaitParams::SleepThenSpin(50'000));
  Step(p, 300'000, &now);  // larger runtimes never raise it
  EXPECT_EQ(p->Decide(0, 0), WaitParams::SleepThenSpin(50'000));
}

TEST(PeerPolicies, BlkMqSleepsHalfThePreviousWindowMean) {
  auto peers = Peers();
  OnlinePolicy* p = peers["blk-mq-hybrid"].get();
  double now = 0;
  // 100 ms of 1 ms requests, then a new window starts.
  for (int i = 0; i < 101; ++i) Step(p, 1'000'000, &now);
  EXPECT_EQ(p->Decide(0, 0), WaitParams::SleepThenSpin(500'000));
}

TEST(PeerPolicies, CpuidleHaltpollGrowsFromFiftyMicros) {
  auto peers = Peers();
  OnlinePolicy* p = peers["cpuidle-haltpoll"].get();
  double now = 0;
  Step(p, 100'000, &now);  // halted 100 us <= 200 us: grow to grow_start
  EXPECT_EQ(p->Decide(0, 0), WaitParams::SpinThenIrq(50'000));
  Step(p, 120'000, &now);  // halted 70 us > limit: x2
  EXPECT_EQ(p->Decide(0, 0), WaitParams::SpinThenIrq(100'000));
  Step(p, 500'000, &now);  // halted 400 us > 200 us: /2
  EXPECT_EQ(p->Decide(0, 0), WaitParams::SpinThenIrq(50'000));
}

TEST(PeerPolicies, KarlinRandomizedMeanThresholdIsBOverEMinusOne) {
  auto peers = Peers();
  OnlinePolicy* p = peers["karlin-rand"].get();
  const double b = 20'000 + 30'000;
  double sum = 0;
  const int n = 200'000;
  for (int i = 0; i < n; ++i) {
    const WaitParams w = p->Decide(0, 0);
    ASSERT_LE(static_cast<double>(w.spin_ns), b);
    sum += static_cast<double>(w.spin_ns);
  }
  // E[T] = integral_0^B t e^(t/B) / (B (e - 1)) dt = B / (e - 1).
  EXPECT_NEAR(sum / n, b / (std::exp(1.0) - 1), b * 0.005);
  EXPECT_EQ(peers["karlin-det"]->Decide(0, 0), WaitParams::SpinThenIrq(50'000));
}

TEST(PeerPolicies, DriverRulesLookAtTheLength) {
  auto peers = Peers();
  EXPECT_EQ(peers["litex-upstream"]->Decide(18, 4096), WaitParams::Irq());
  EXPECT_EQ(peers["litex-upstream"]->Decide(23, 0), WaitParams::PollSleep(5'000));
  EXPECT_EQ(peers["mxs-mmc-vendor"]->Decide(53, 1024).strategy, Strategy::kSpin);
  EXPECT_EQ(peers["mxs-mmc-vendor"]->Decide(53, 1025), WaitParams::Irq());
}

TEST(PeerPolicies, DpasAdjustsItsSleepMultiplicatively) {
  auto peers = Peers();
  OnlinePolicy* p = peers["dpas-pas"].get();
  double now = 0;
  const uint64_t start = p->Decide(0, 0).sleep_ns;
  // Requests that always need more polling ("under"): the sleep grows.
  for (int i = 0; i < 500; ++i) Step(p, 1'000'000, &now);
  EXPECT_GT(p->Decide(0, 0).sleep_ns, 10 * start);
}

}  // namespace
}  // namespace spintune
