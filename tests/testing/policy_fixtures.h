// Hand-built policy tables shared by tests.
#ifndef SPINTUNE_TESTS_TESTING_POLICY_FIXTURES_H_
#define SPINTUNE_TESTS_TESTING_POLICY_FIXTURES_H_

#include "policy/policy_table.h"

namespace spintune::testing {

inline PolicyEntry Entry(const std::string& cpu, const std::string& device, uint32_t opcode,
                         uint32_t size_class, WaitParams wait, uint64_t samples = 100) {
  PolicyEntry e;
  e.key = {cpu, device, opcode, size_class};
  e.wait = wait;
  e.samples = samples;
  e.p50_ns = 1000;
  e.p99_ns = 5000;
  return e;
}

inline PolicyEntry Fallback(const std::string& device, WaitParams wait) {
  PolicyEntry e = Entry(kAnyCpuClass, device, 0, 0, wait, 0);
  e.fallback = true;
  return e;
}

// Two CPU classes, two devices, every strategy once.
inline PolicyTable SampleTable() {
  PolicyTable t;
  t.version = 7;
  t.board = "litex-rocket-50mhz";
  t.fitted_at = "2026-11-30T00:00:00Z";
  t.max_spin_ns = 1'000'000;
  t.cpu_classes = {{"big", 1'200'000, {}}, {"little", 600'000, {}}};
  t.devices = {{"mmc0", "litex-mmc", "SanDisk Ultra", {}}, {"spi0", "spi-bcm2835", "ks8851", {}}};
  t.entries = {
      Entry("big", "mmc0", 23, 0, WaitParams::SpinThenIrq(12'000)),
      Entry("big", "mmc0", 18, 13, WaitParams::Irq()),
      Entry("little", "mmc0", 18, 13, WaitParams::SleepThenSpin(150'000)),
      Entry("big", "mmc0", 13, 0, WaitParams::Spin(1'000'000)),
      Fallback("mmc0", WaitParams::Irq()),
      Entry("big", "spi0", 0, 3, WaitParams::PollSleep(5'000)),
      Fallback("spi0", WaitParams::SpinThenIrq(30'000)),
  };
  t.entries[2].wait.spin_ns = 1'000'000;  // post-sleep spin bound
  SortEntries(&t.entries);
  return t;
}

// SampleTable() plus CMD25 of 4 KiB on the big class split by context three
// ways: after a completion under 1 ms (SPIN_THEN_IRQ 300 us); after a longer
// one with fewer than 2 commands in flight (IRQ); with 2 or more
// (SLEEP_THEN_SPIN 2 ms, spin bound 100 us). Entries 3, 4, 5 of mmc0's blob.
inline PolicyTable ContextTable() {
  PolicyTable t = SampleTable();
  ContextTree tree;
  tree.Split(0, ContextFeature::kPrevWaitNs, 1'000'000);
  tree.Split(1, ContextFeature::kInflight, 2);
  const auto leaves = tree.LeafConditions();
  const WaitParams waits[] = {WaitParams::SpinThenIrq(300'000), WaitParams::Irq(),
                              WaitParams::SleepThenSpin(2'000'000, 100'000)};
  for (size_t i = 0; i < leaves.size(); ++i) {
    PolicyEntry e = Entry("big", "mmc0", 25, 13, waits[i]);
    e.context = leaves[i];
    t.entries.push_back(e);
  }
  SortEntries(&t.entries);
  return t;
}

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_POLICY_FIXTURES_H_
