// The wait helpers against a fake clock and a fake status register.
#include <cstdint>

#include "gtest/gtest.h"

// A fake clock: every reading advances time by kTickNs. A delay (the
// atomic spin's step) advances it by its length without reading it.
namespace {
uint64_t fake_now_ns = 0;
uint64_t fake_slept_ns = 0;
int clock_reads = 0;
constexpr uint64_t kTickNs = 100;
uint64_t FakeNow() {
  ++clock_reads;
  fake_now_ns += kTickNs;
  return fake_now_ns;
}
void FakeSleep(uint64_t ns) {
  fake_now_ns += ns;
  fake_slept_ns += ns;
}
void FakeDelay(uint64_t ns) { fake_now_ns += ns; }
// The device completes when the clock reaches done_at_ns.
uint64_t done_at_ns = 0;
int reads = 0;
uint32_t ReadStatus(int /*reg*/) {
  ++reads;
  return fake_now_ns >= done_at_ns ? 1u : 0u;
}
}  // namespace

#define SPINTUNE_NOW_NS() FakeNow()
#define SPINTUNE_CPU_RELAX() ((void)0)
#define SPINTUNE_SLEEP_NS(ns) FakeSleep(ns)
#define SPINTUNE_DELAY_NS(ns) FakeDelay(ns)
#include "spintune/wait.h"

namespace {

void Reset(uint64_t done_at) {
  fake_now_ns = 0;
  fake_slept_ns = 0;
  done_at_ns = done_at;
  reads = 0;
  clock_reads = 0;
}

spintune_entry Entry(uint8_t strategy, uint32_t spin_ns, uint32_t sleep_ns = 0,
                     uint32_t poll_ns = 0) {
  spintune_entry e{};
  e.strategy = strategy;
  e.spin_ns = spin_ns;
  e.sleep_ns = sleep_ns;
  e.poll_interval_ns = poll_ns;
  return e;
}

TEST(Wait, SpinThenIrqCatchesAQuickCompletion) {
  Reset(1'000);
  spintune_wait_stats stats{};
  uint32_t val = 0;
  const spintune_entry e = Entry(SPINTUNE_SPIN_THEN_IRQ, 10'000);
  EXPECT_EQ(spintune_wait_atomic(&e, ReadStatus, val, val & 1, &stats, 0), 0);
  EXPECT_EQ(val, 1u);
  EXPECT_EQ(stats.spin_hits, 1u);
  EXPECT_EQ(stats.irq_fallbacks, 0u);
}

TEST(Wait, SpinThenIrqFallsBackToTheIrqAfterItsThreshold) {
  Reset(1'000'000);
  spintune_wait_stats stats{};
  uint32_t val = 0;
  const spintune_entry e = Entry(SPINTUNE_SPIN_THEN_IRQ, 10'000);
  EXPECT_EQ(spintune_wait_atomic(&e, ReadStatus, val, val & 1, &stats, 0), SPINTUNE_ARM_IRQ);
  EXPECT_EQ(stats.irq_fallbacks, 1u);
  // One poll, then one per step of the 10 us budget, the last after it.
  EXPECT_EQ(stats.polls, 10'000u / SPINTUNE_ATOMIC_STEP_NS + 1);
  EXPECT_EQ(fake_now_ns, 10'000u);
  EXPECT_EQ(stats.atomic_downgrades, 0u);
}

TEST(Wait, AtomicSpinNeverReadsTheClock) {
  // A clock that stands still (time-keeping suspended, interrupts off)
  // cannot keep an atomic spin going: it counts polls, not time.
  Reset(1'000'000);
  uint32_t val = 0;
  const spintune_entry e = Entry(SPINTUNE_SPIN_THEN_IRQ, 50'000);
  EXPECT_EQ(spintune_wait_atomic(&e, ReadStatus, val, val & 1, (spintune_wait_stats*)nullptr, 0),
            SPINTUNE_ARM_IRQ);
  EXPECT_EQ(clock_reads, 0);
  EXPECT_EQ(reads, static_cast<int>(50'000u / SPINTUNE_ATOMIC_STEP_NS + 1));
}

TEST(Wait, AtomicSpinSeesAConditionTrueRightAfterItsLastStep) {
  // The budget ends at 10 us; the device completes exactly then: the poll
  // after the last step still sees it.
  Reset(10'000);
  uint32_t val = 0;
  EXPECT_EQ(spintune_spin_ns_atomic(ReadStatus, val, val & 1, 10'000,
                                    (spintune_wait_stats*)nullptr, 0),
            0);
  Reset(10'001);
  EXPECT_EQ(spintune_spin_ns_atomic(ReadStatus, val, val & 1, 10'000,
                                    (spintune_wait_stats*)nullptr, 0),
            SPINTUNE_ARM_IRQ);
}

TEST(Wait, AtomicSpinIsCappedAndALongSpinTakesTheIrqInstead) {
  // A 1 ms SPIN asked of an atomic wait: it spins the atomic cap, then
  // arms the IRQ (its timeout has not passed, so it does not time out).
  Reset(5'000'000);
  uint32_t val = 0;
  spintune_wait_stats stats{};
  const spintune_entry e = Entry(SPINTUNE_SPIN, 1'000'000);
  EXPECT_EQ(spintune_wait_atomic(&e, ReadStatus, val, val & 1, &stats, 0), SPINTUNE_ARM_IRQ);
  EXPECT_EQ(fake_now_ns, uint64_t{SPINTUNE_MAX_ATOMIC_SPIN_NS});
  EXPECT_EQ(stats.polls, SPINTUNE_MAX_ATOMIC_SPIN_NS / SPINTUNE_ATOMIC_STEP_NS + 1);
  EXPECT_EQ(stats.atomic_downgrades, 1u);
  EXPECT_EQ(stats.timeouts, 0u);
  // In process context the same entry spins its 1 ms by the clock.
  Reset(5'000'000);
  stats = {};
  EXPECT_EQ(spintune_wait(&e, ReadStatus, val, val & 1, 1'000'000'000, &stats, 0), -ETIMEDOUT);
  EXPECT_GE(fake_now_ns, 1'000'000u);
  EXPECT_EQ(stats.atomic_downgrades, 0u);
}

TEST(Wait, ConditionTrueExactlyAtTheDeadlineIsNotAMiss) {
  // The clock reads 100 ns later on every call: the spin starts at 100 ns,
  // its 10 us budget runs out on the reading at 10,100 ns. A device that
  // completes exactly then is still seen: the helper reads the status once
  // more after noticing the deadline (iopoll's rule since its 2025 rework).
  Reset(10'100);
  uint32_t val = 0;
  EXPECT_EQ(spintune_spin_ns(ReadStatus, val, val & 1, 10'000,
                             (spintune_wait_stats*)nullptr, 0),
            0);
  // One tick later is a miss: arm the IRQ.
  Reset(10'200);
  EXPECT_EQ(spintune_spin_ns(ReadStatus, val, val & 1, 10'000,
                             (spintune_wait_stats*)nullptr, 0),
            SPINTUNE_ARM_IRQ);
}

TEST(Wait, IrqArmsAtOnceWithoutPolling) {
  Reset(0);
  uint32_t val = 0;
  const spintune_entry e = Entry(SPINTUNE_IRQ, 0);
  EXPECT_EQ(spintune_wait_atomic(&e, ReadStatus, val, val & 1, (spintune_wait_stats*)nullptr, 0),
            SPINTUNE_ARM_IRQ);
  EXPECT_EQ(reads, 0);
}

TEST(Wait, SpinTimesOut) {
  Reset(1'000'000);
  uint32_t val = 0;
  spintune_wait_stats stats{};
  const spintune_entry e = Entry(SPINTUNE_SPIN, 20'000);
  EXPECT_EQ(spintune_wait_atomic(&e, ReadStatus, val, val & 1, &stats, 0), -ETIMEDOUT);
  EXPECT_EQ(stats.timeouts, 1u);
}

TEST(Wait, SleepThenSpinSleepsFirst) {
  Reset(60'000);
  uint32_t val = 0;
  spintune_wait_stats stats{};
  const spintune_entry e = Entry(SPINTUNE_SLEEP_THEN_SPIN, 50'000, 55'000);
  EXPECT_EQ(spintune_wait(&e, ReadStatus, val, val & 1, 1'000'000, &stats, 0), 0);
  EXPECT_EQ(fake_slept_ns, 55'000u);
  EXPECT_EQ(stats.sleeps, 1u);
  EXPECT_EQ(stats.spin_hits, 1u);
  // In atomic context the sleeping strategies arm the IRQ instead, and
  // say so.
  Reset(60'000);
  stats = {};
  EXPECT_EQ(spintune_wait_atomic(&e, ReadStatus, val, val & 1, &stats, 0), SPINTUNE_ARM_IRQ);
  EXPECT_EQ(fake_slept_ns, 0u);
  EXPECT_EQ(stats.atomic_downgrades, 1u);
  EXPECT_EQ(reads, 0);
}

TEST(Wait, PollSleepPollsBetweenSleepsUntilItsTimeout) {
  Reset(25'000);
  uint32_t val = 0;
  spintune_wait_stats stats{};
  const spintune_entry e = Entry(SPINTUNE_POLL_SLEEP, 0, 0, 10'000);
  EXPECT_EQ(spintune_wait(&e, ReadStatus, val, val & 1, 1'000'000, &stats, 0), 0);
  EXPECT_EQ(stats.sleeps, 3u);  // polls at ~0, ~10, ~20 us fail, ~30 us succeeds
  Reset(10'000'000);
  EXPECT_EQ(spintune_wait(&e, ReadStatus, val, val & 1, 100'000, &stats, 0), -ETIMEDOUT);
}

}  // namespace
