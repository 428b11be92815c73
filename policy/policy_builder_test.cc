#include "policy/policy_builder.h"

#include <random>

#include "gtest/gtest.h"

namespace spintune {
namespace {

FitInputs TwoKeyInputs() {
  FitInputs in;
  in.board = "test-board";
  PlatformCosts costs{20'000, 30'000, 100, 2'000, 50'000};
  in.cpu_classes = {{"cpu", 100'000, costs}};
  DefaultRule poll;
  poll.wait = WaitParams::PollSleep(5'000);
  poll.note = "litex default SD_SLEEP_US 5";
  in.devices = {{"mmc0", "litex-mmc", "card", {poll}}};
  KeyEvidence fast;  // CMD23: 2us, spin it (B = 50us)
  fast.key = {"cpu", "mmc0", 23, 0};
  fast.histogram.Record(2'000, 500);
  KeyEvidence slow;  // CMD18: always 3ms: sleep through it, then poll
  slow.key = {"cpu", "mmc0", 18, 13};
  slow.histogram.Record(3'000'000, 400);
  KeyEvidence rare;  // below min_samples
  rare.key = {"cpu", "mmc0", 6, 0};
  rare.histogram.Record(1'000, 10);
  in.keys = {fast, slow, rare};
  return in;
}

TEST(PolicyBuilder, FitsEveryKeyWithEnoughSamplesAndAFallback) {
  FitConfig config;
  config.min_samples = 50;
  config.max_spin_ns = 1'000'000;
  auto t = BuildPolicyTable(TwoKeyInputs(), config);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->entries.size(), 3u);  // op 18, op 23, fallback; op 6 too rare
  EXPECT_EQ(t->entries[0].key.opcode, 18u);
  // A deterministic 3ms wait: sleeping S = 3ms - timer_wake costs timer_cpu
  // (2us) + 3ms of latency, less than IRQ's 20us + 3.03ms.
  EXPECT_EQ(t->entries[0].wait.strategy, Strategy::kSleepThenSpin);
  EXPECT_NEAR(static_cast<double>(t->entries[0].wait.sleep_ns), 2'950'000, 3'000'000 * 0.005);
  EXPECT_EQ(t->entries[1].key.opcode, 23u);
  EXPECT_EQ(t->entries[1].wait.strategy, Strategy::kSpinThenIrq);
  EXPECT_TRUE(t->entries[2].fallback);
  EXPECT_EQ(t->entries[2].samples, 910u);
  EXPECT_EQ(t->TotalSamples(), 900u);
  // The driver default (poll with 5us sleeps, oversleeping 50us) is priced
  // on the same histogram: CMD23 waits one sleep, 55us, instead of 2us.
  ASSERT_TRUE(t->entries[1].default_wait.has_value());
  EXPECT_NEAR(t->entries[1].default_expected.latency_ns, 55'000, 55'000 * 0.01);
  EXPECT_LT(t->entries[1].expected_cost_ns, t->entries[1].default_cost_ns);
  EXPECT_EQ(t->entries[1].families.size(), 5u);
}

TEST(PolicyBuilder, TimeoutsExcludeThePathThatTimedOut) {
  FitInputs in = TwoKeyInputs();
  in.keys[1].irq_timeouts = 1;  // CMD18 lost an interrupt
  FitConfig config;
  config.max_spin_ns = 10'000'000;
  auto t = BuildPolicyTable(in, config);
  ASSERT_TRUE(t.ok());
  EXPECT_NE(t->entries[0].wait.strategy, Strategy::kIrq);
  EXPECT_NE(t->entries[0].wait.strategy, Strategy::kSpinThenIrq);
}

TEST(PolicyBuilder, DeviceWithTooFewSamplesFallsBackToIrq) {
  FitInputs in = TwoKeyInputs();
  in.keys.resize(1);
  FitConfig config;
  config.min_samples = 1000;
  auto t = BuildPolicyTable(in, config);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->entries.size(), 1u);
  EXPECT_TRUE(t->entries[0].fallback);
  EXPECT_EQ(t->entries[0].wait, WaitParams::Irq());
}

TEST(PolicyBuilder, HysteresisKeepsTheIncumbentUnlessTheGainIsReal) {
  FitConfig config;
  config.hysteresis = 0.02;
  auto fresh = BuildPolicyTable(TwoKeyInputs(), config);
  ASSERT_TRUE(fresh.ok());
  // An incumbent whose CMD23 threshold is 10% longer: same cost on these
  // samples (every one is caught), so it is kept.
  PolicyTable incumbent = *fresh;
  incumbent.entries[1].wait.spin_ns = fresh->entries[1].wait.spin_ns * 11 / 10;
  auto kept = BuildPolicyTable(TwoKeyInputs(), config, &incumbent);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->entries[1].wait, incumbent.entries[1].wait);
  // An incumbent that blocks on CMD23 (2 us waits, B = 50 us) is far worse:
  // replaced.
  incumbent.entries[1].wait = WaitParams::Irq();
  auto replaced = BuildPolicyTable(TwoKeyInputs(), config, &incumbent);
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->entries[1].wait, fresh->entries[1].wait);
  // Hysteresis 0 ignores the incumbent: the fresh fit always wins.
  config.hysteresis = 0;
  incumbent.entries[1].wait.spin_ns = fresh->entries[1].wait.spin_ns * 11 / 10;
  incumbent.entries[1].wait.strategy = Strategy::kSpinThenIrq;
  auto strict = BuildPolicyTable(TwoKeyInputs(), config, &incumbent);
  ASSERT_TRUE(strict.ok());
  EXPECT_EQ(strict->entries[1].wait, fresh->entries[1].wait);
}

TEST(PolicyBuilder, EveryFittedEntryHasAGainInterval) {
  auto t = BuildPolicyTable(TwoKeyInputs(), FitConfig());
  ASSERT_TRUE(t.ok());
  for (const auto& e : t->entries) {
    EXPECT_FALSE(e.gain_baseline.empty());
    EXPECT_LE(e.gain_ci_low_ns, e.gain_ns + 1e-9);
    EXPECT_GE(e.gain_ci_high_ns, e.gain_ns - 1e-9);
  }
  // CMD23 against the driver default (poll with 5 us sleeps): a large gain.
  EXPECT_EQ(t->entries[1].gain_baseline, "default");
  EXPECT_GT(t->entries[1].gain_ci_low_ns, 0);
}

TEST(PolicyBuilder, RejectsUnknownNames) {
  FitInputs in = TwoKeyInputs();
  in.keys[0].key.cpu_class = "nope";
  EXPECT_EQ(BuildPolicyTable(in, FitConfig()).status().code(),
            absl::StatusCode::kInvalidArgument);
  in = TwoKeyInputs();
  in.keys[0].key.device = "nope";
  EXPECT_EQ(BuildPolicyTable(in, FitConfig()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Costs built from a few exact terms: only rounding separates the answers.
constexpr double kExact = 1e-9;

TEST(PolicyBuilder, FitsOverTheMeasuredOversleepDistribution) {
  // The known answer of WaitOptimizer.SleepThenSpinOptimumIsExactOverThe-
  // OversleepDistribution: X = 100 ns, oversleep 10 ns (3 of 4) or 50 ns
  // (mean 20, the declared constant). Priced over the distribution the best
  // sleep is S = 90 (J = 115); with the constant, S = 80 (J = 105 predicted).
  FitInputs in;
  in.board = "b";
  in.cpu_classes = {{"cpu", 100'000, {40, 20, 1, 5, 20}}};
  in.devices = {{"dev", "drv", "model", {}}};
  KeyEvidence k;
  k.key = {"cpu", "dev", 1, 0};
  k.histogram.Record(100, 100);
  in.keys = {k};
  FitConfig config;
  config.min_samples = 50;
  auto constant = BuildPolicyTable(in, config);
  ASSERT_TRUE(constant.ok()) << constant.status();
  EXPECT_EQ(constant->entries[0].wait, WaitParams::SleepThenSpin(80, config.max_spin_ns));
  EXPECT_NEAR(constant->entries[0].expected_cost_ns, 105, kExact);

  in.measured_costs["cpu"].timer_wake.Record(10, 3);
  in.measured_costs["cpu"].timer_wake.Record(50, 1);
  auto measured = BuildPolicyTable(in, config);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(measured->entries[0].wait, WaitParams::SleepThenSpin(90, config.max_spin_ns));
  EXPECT_NEAR(measured->entries[0].expected_cost_ns, 115, kExact);
  // The table records the means it was fitted with.
  EXPECT_NEAR(measured->cpu_classes[0].costs.timer_wake_ns, 20, kExact);
}

TEST(PolicyBuilder, MeasuredIrqCostsReplaceTheDeclaredOnes) {
  // Handler 100 ns after a 400 ns overhead: irq_cpu 500; wake 200 ns.
  FitInputs in = TwoKeyInputs();
  MeasuredCosts& m = in.measured_costs["cpu"];
  m.irq_handler.Record(100, 10);
  m.irq_overhead_cpu_ns = 400;
  m.irq_wake.Record(200, 10);
  auto t = BuildPolicyTable(in, FitConfig());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(t->cpu_classes[0].costs.irq_cpu_ns, 500, kExact);
  EXPECT_NEAR(t->cpu_classes[0].costs.irq_wake_ns, 200, kExact);
  EXPECT_EQ(t->cpu_classes[0].costs.timer_wake_ns, 50'000);  // declared
}

// A key whose IRQ path the driver measured (outcomes under an IRQ wait) is
// priced by it. One key, X = 10 us always; the class declares irq_cpu 2 us
// and irq_wake 2 us, poll 0.1 us, and an expensive timer:
//   declared:   IRQ J = 2 + (10 + 2)           = 14 us   (spin: ~10 + 10 = 20)
//   measured:   mean CPU 6 us, mean latency 30 us -> irq_cpu 6, irq_wake 20:
//               IRQ J = 6 + (10 + 20)          = 36 us   -> spinning (20 us)
// 99 measured requests are too few (kMinIrqPathRequests = 100): declared.
TEST(PolicyBuilder, AKeysMeasuredIrqPathPricesItsIrqWait) {
  FitInputs in;
  in.board = "test-board";
  in.cpu_classes = {{"cpu", 1'000'000, PlatformCosts{2'000, 2'000, 100, 50'000, 500'000}}};
  in.devices = {{"uring0", "io_uring", "file", {}}};
  KeyEvidence k;
  k.key = {"cpu", "uring0", 0, 13};
  k.histogram.Record(10'000, 1000);
  in.keys = {k};
  FitConfig config;
  config.min_samples = 50;
  config.max_spin_ns = 1'000'000;
  auto entry = [&](const FitInputs& inputs) {
    auto t = BuildPolicyTable(inputs, config);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? t->entries[0] : PolicyEntry();
  };
  const double x_ns = k.histogram.MeanNs();
  const PolicyEntry declared = entry(in);
  EXPECT_EQ(declared.wait.strategy, Strategy::kIrq);
  EXPECT_NEAR(declared.expected.cpu_ns, 2'000, kExact);
  EXPECT_NEAR(declared.expected.latency_ns, x_ns + 2'000, kExact);

  CostMoments irq;
  for (int i = 0; i < 99; ++i) irq.Add(6'000, 30'000);
  in.irq_outcomes[k.key] = irq;
  EXPECT_EQ(entry(in).wait.strategy, Strategy::kIrq) << "99 requests: not enough";

  irq.Add(6'000, 30'000);
  in.irq_outcomes[k.key] = irq;
  const PolicyEntry measured = entry(in);
  EXPECT_NE(measured.wait.strategy, Strategy::kIrq) << StrategyName(measured.wait.strategy);
  EXPECT_NEAR(measured.expected_cost_ns, 2 * x_ns, 0.02 * x_ns) << "spinning through X";
  // The table's CPU class keeps its declared constants.
  auto t = BuildPolicyTable(in, config);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->cpu_classes[0].costs.irq_cpu_ns, 2'000);
  EXPECT_EQ(t->cpu_classes[0].costs.irq_wake_ns, 2'000);
}

// A device whose reads (CMD18) issued within 300 us of a write's (CMD25)
// completion take 1 ms, the others 20 us; writes take 100 us. Commands go
// one at a time, 10 us apart, 30% writes.
FitInputs ReadAfterWriteInputs() {
  FitInputs in;
  in.board = "b";
  in.cpu_classes = {{"cpu", 100'000, {20'000, 30'000, 100, 5'000, 50'000}}};
  in.devices = {{"mmc0", "litex-mmc", "card", {}}};
  KeyEvidence read, write;
  read.key = {"cpu", "mmc0", 18, 13};
  write.key = {"cpu", "mmc0", 25, 13};
  std::mt19937_64 rng(3);
  uint64_t now = 0, last_write_done = 0;
  bool wrote = false;
  for (int i = 0; i < 6000; ++i) {
    const bool is_write = std::uniform_real_distribution<double>(0, 1)(rng) < 0.3;
    uint64_t x = 100'000;
    if (!is_write) x = wrote && now - last_write_done < 300'000 ? 1'000'000 : 20'000;
    (is_write ? write : read).histogram.Record(x);
    in.requests.push_back({is_write ? 1u : 0u, 0, is_write ? 25u : 18u, 4096, now, x});
    if (is_write) {
      wrote = true;
      last_write_done = now + x;
    }
    now += x + 10'000;
  }
  in.keys = {read, write};
  return in;
}

TEST(PolicyBuilder, ContextLeavesFromTheTimeSinceTheLastWrite) {
  auto t = BuildPolicyTable(ReadAfterWriteInputs(), FitConfig());
  ASSERT_TRUE(t.ok()) << t.status();
  // CMD18 became two leaves split on since_write_ns, each fitted as an
  // entry; CMD25 (i.i.d.) and the fallback stay single.
  std::vector<const PolicyEntry*> reads;
  for (const auto& e : t->entries) {
    if (!e.fallback && e.key.opcode == 18) reads.push_back(&e);
    if (e.key.opcode == 25 || e.fallback) {
      EXPECT_TRUE(e.context.empty());
    }
  }
  ASSERT_EQ(reads.size(), 2u);
  ASSERT_EQ(reads[0]->context.size(), 1u);
  EXPECT_EQ(reads[0]->context[0].feature, ContextFeature::kSinceWriteNs);
  ASSERT_TRUE(reads[0]->context[0].max.has_value());
  EXPECT_EQ(reads[1]->context[0].min, reads[0]->context[0].max);
  // Right after a write: sleep through the 1 ms; later: spin the 20 us.
  EXPECT_EQ(reads[0]->wait.strategy, Strategy::kSleepThenSpin);
  EXPECT_EQ(reads[1]->wait.strategy, Strategy::kSpinThenIrq);
  // The leaves share the key's samples: all of the device's but the writes'.
  ASSERT_EQ(t->entries[2].key.opcode, 25u);
  EXPECT_EQ(reads[0]->samples + reads[1]->samples,
            t->entries.back().samples - t->entries[2].samples);
  EXPECT_FALSE(reads[0]->families.empty());
  EXPECT_FALSE(reads[0]->gain_baseline.empty());

  // --context off, or a device that names no write: one entry per key.
  FitConfig off;
  off.context = false;
  auto plain = BuildPolicyTable(ReadAfterWriteInputs(), off);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(ContextLeafCount(*plain), 0u);
  EXPECT_EQ(plain->entries.size(), 3u);
  FitInputs no_writes = ReadAfterWriteInputs();
  no_writes.devices[0].write_opcodes = {};
  auto blind = BuildPolicyTable(no_writes, FitConfig());
  ASSERT_TRUE(blind.ok());
  for (const auto& e : blind->entries) {
    for (const auto& c : e.context) {
      EXPECT_NE(c.feature, ContextFeature::kSinceWriteNs);
    }
  }
}

TEST(PolicyBuilder, RequestsMustIndexKeysAndDevices) {
  FitInputs in = ReadAfterWriteInputs();
  in.requests[5].key = 9;
  EXPECT_EQ(BuildPolicyTable(in, FitConfig()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spintune
