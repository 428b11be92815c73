#include "agent/sim_source.h"

#include <map>

#include "gtest/gtest.h"

namespace spintune {
namespace {

TEST(SimSource, EverySeedBoardIsInTheCatalog) {
  // The systems of the seed reports (issue 2, item 5).
  for (const char* name :
       {"litex-rocket-50mhz-slowcard", "litex-rocket-50mhz-fastcard",
        "litex-rocket-100mhz-slowcard", "litex-rocket-100mhz-fastcard", "litex-naxriscv-100mhz",
        "microwatt-100mhz", "imx28-mxs-mmc", "bcm2835-spi-20mhz", "ls1021a-dspi-12mhz"}) {
    const BoardModel* b = FindBoard(name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_TRUE(b->Costs().Validate().ok()) << name;
    EXPECT_FALSE(b->default_rules.empty()) << name;
    EXPECT_FALSE(b->sources.empty()) << name;
  }
  EXPECT_EQ(FindBoard("nope"), nullptr);
}

TEST(SimSource, PlatformCostsScaleWithTheClock) {
  // Microwatt: IRQ -> task >= 120 us at 100 MHz (seed 000).
  EXPECT_NEAR(FindBoard("microwatt-100mhz")->Costs().irq_wake_ns, 120'000, 1);
  // Same Rocket cycles at half the clock take twice as long.
  EXPECT_NEAR(FindBoard("litex-rocket-50mhz-fastcard")->Costs().irq_cpu_ns,
              2 * FindBoard("litex-rocket-100mhz-fastcard")->Costs().irq_cpu_ns, 1);
}

TEST(SimSource, IsDeterministicPerSeed) {
  const BoardModel& b = *FindBoard("litex-rocket-50mhz-slowcard");
  SimSource a(b, 42), c(b, 42), d(b, 43);
  v1::SampleBatch ba, bc, bd;
  ASSERT_EQ(*a.Fill(1000, &ba), 1000u);
  ASSERT_EQ(*c.Fill(1000, &bc), 1000u);
  ASSERT_EQ(*d.Fill(1000, &bd), 1000u);
  EXPECT_EQ(ba.SerializeAsString(), bc.SerializeAsString());
  EXPECT_NE(ba.SerializeAsString(), bd.SerializeAsString());
}

TEST(SimSource, CompletionTimesFollowTheCalibration) {
  // Rocket 50 MHz, fast card: CMD18 of 4 KiB = 60 us access + 4096 bytes at
  // 80 ns/byte (sd_clk 25 MHz, 4 bits) + 400 cycles = ~396 us median; CMD23
  // = 0.5 us + 400 cycles = 8.5 us. The stock driver waits on the IRQ for
  // data commands and polls the others.
  SimSource s(*FindBoard("litex-rocket-50mhz-fastcard"), 1);
  v1::SampleBatch batch;
  ASSERT_TRUE(s.Fill(20000, &batch).ok());
  std::map<uint32_t, std::vector<uint64_t>> by_opcode;
  const auto& c = batch.completions();
  size_t irq = 0;
  for (int i = 0; i < c.wait_ns_size(); ++i) {
    by_opcode[c.opcode(i)].push_back(c.wait_ns(i));
    if (c.path(i) == v1::WAIT_PATH_IRQ) {
      ++irq;
      EXPECT_GT(c.bytes(i), 0u);
    }
  }
  EXPECT_EQ(static_cast<int>(irq), batch.dispatches().handler_ns_size());
  auto median = [](std::vector<uint64_t> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return static_cast<double>(v[v.size() / 2]);
  };
  EXPECT_NEAR(median(by_opcode[18]), 396'000, 396'000 * 0.05);
  EXPECT_NEAR(median(by_opcode[23]), 8'500, 8'500 * 0.05);
  EXPECT_NEAR(static_cast<double>(by_opcode[23].size()) / 20000, 0.40, 0.02);
}

TEST(SimSource, MakeSampleSourceRejectsUnknownSpecs) {
  EXPECT_TRUE(MakeSampleSource("sim:microwatt-100mhz", 1).ok());
  EXPECT_EQ(MakeSampleSource("sim:nope", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeSampleSource("ftrace:vda", 1).status().code(), absl::StatusCode::kInvalidArgument);
  // File sources need platform costs.
  EXPECT_EQ(MakeSampleSource("csv:x.csv", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeSampleSource("replay:x.txt", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spintune

namespace spintune {
namespace {

TEST(SimSource, IssueTimesFollowTheCompletionsAndLeaveCalibratedSamplesAlone) {
  const BoardModel& b = *FindBoard("litex-rocket-50mhz-fastcard");
  SimSource s(b, 7);
  v1::SampleBatch batch;
  ASSERT_EQ(*s.Fill(2000, &batch), 2000u);
  const auto& c = batch.completions();
  ASSERT_EQ(c.issue_ns_size(), c.wait_ns_size());
  for (int i = 1; i < c.issue_ns_size(); ++i) {
    EXPECT_GE(c.issue_ns(i), c.issue_ns(i - 1) + c.wait_ns(i - 1) - 1) << i;  // one at a time
  }
  // The completion times are the i.i.d. model's, drawn as before issue
  // times existed: opcode, size, time, error from the one generator (the
  // simulated driver's waits draw from a generator of their own).
  std::mt19937_64 rng(7);
  std::vector<double> shares;
  for (const auto& op : b.opcodes) shares.push_back(op.share);
  std::discrete_distribution<size_t> pick(shares.begin(), shares.end());
  for (int i = 0; i < 100; ++i) {
    const OpcodeModel& op = b.opcodes[pick(rng)];
    std::vector<double> sizes;
    for (const auto& sz : op.sizes) sizes.push_back(sz.share);
    std::discrete_distribution<size_t> pick_size(sizes.begin(), sizes.end());
    const uint64_t bytes = op.sizes[pick_size(rng)].bytes;
    const double x = DrawCompletionNs(b, op, bytes, rng);
    std::uniform_real_distribution<double>(0, 1)(rng);  // the error draw
    ASSERT_EQ(c.opcode(i), op.opcode) << i;
    ASSERT_EQ(c.wait_ns(i), std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(x)))) << i;
  }
}

TEST(SimSource, GarbageCollectionComesInEpisodes) {
  // litex-rocket-100mhz-fastcard-gc: the card's 3% of slow writes, in
  // episodes of 25 commands on average; reads within 500 us of a write's
  // completion 250 us slower.
  const BoardModel& b = *FindBoard("litex-rocket-100mhz-fastcard-gc");
  ASSERT_TRUE(b.modulation.modulated());
  EXPECT_FALSE(FindBoard("litex-rocket-100mhz-fastcard")->modulation.modulated());
  std::mt19937_64 rng(3);
  BoardSimulator sim(b, 3, &rng);
  size_t writes = 0, slow_writes = 0, busy = 0, episodes = 0;
  size_t after_slow = 0, slow_after_slow = 0;
  std::vector<double> near_reads, far_reads;
  bool was_busy = false;
  double previous_x = 0, last_write_done = -1e18;
  for (int i = 0; i < 200000; ++i) {
    const SimRequest r = sim.Next();
    busy += r.busy;
    episodes += r.busy && !was_busy;
    was_busy = r.busy;
    if (r.op->opcode == 25) {
      ++writes;
      const bool slow = r.x_ns > 2e6;
      slow_writes += slow;
      if (previous_x > 1e6) {  // the previous command waited out a busy card
        ++after_slow;
        slow_after_slow += slow;
      }
      last_write_done = static_cast<double>(r.issue_ns) + r.x_ns;
    } else if (r.op->opcode == 18) {
      const double since = static_cast<double>(r.issue_ns) - last_write_done;
      (since < 500e3 ? near_reads : far_reads).push_back(r.x_ns);
    }
    previous_x = r.x_ns;
  }
  EXPECT_NEAR(static_cast<double>(slow_writes) / writes, 0.03, 0.006);
  EXPECT_NEAR(static_cast<double>(busy) / episodes, 25, 5);
  // After a command that took over 1 ms, a write is slow most of the time.
  EXPECT_GT(static_cast<double>(slow_after_slow) / after_slow, 0.7);
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  EXPECT_NEAR(median(near_reads) - median(far_reads), 250e3, 40e3);
}

}  // namespace
}  // namespace spintune
