// Drift end to end: an agent whose device slows down midway (a card that
// starts garbage collection). The tuner must detect the change, refit on the
// samples after it, and push a table that blocks instead of spinning.
#include <cmath>
#include <random>

#include "absl/time/clock.h"
#include "agent/agent.h"
#include "agent/policy_sink.h"
#include "bench/sim_histograms.h"
#include "gtest/gtest.h"
#include "policy/policy_proto.h"
#include "storage/store.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait_for.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

// One CPU class, "cpu" at 1 GHz, and one device, mmc0.
void DescribeBoard(const std::string& board, v1::Hello* hello) {
  hello->mutable_target()->set_board(board);
  auto* cpu = hello->mutable_target()->add_cpu_classes();
  cpu->set_name("cpu");
  cpu->set_cpu_khz(1'000'000);
  CostsToProto({20'000, 30'000, 100, 2'000, 50'000}, cpu->mutable_costs());
  auto* d = hello->add_devices();
  d->set_name("mmc0");
  d->set_driver("test");
}

class ShiftingSource : public SampleSource {
 public:
  explicit ShiftingSource(uint64_t shift_after) : shift_after_(shift_after) {}
  bool exhausted() const override { return false; }
  void Describe(v1::Hello* hello) const override { DescribeBoard("shifting-board", hello); }
  absl::StatusOr<size_t> Fill(size_t n, v1::SampleBatch* batch) override {
    auto* c = batch->mutable_completions();
    for (size_t i = 0; i < n; ++i, ++produced_) {
      // 5 us (spin them) before the shift, 400 us after: spinning the old
      // threshold (B = 50 us) first then blocking costs 11% more than
      // blocking at once, well beyond the 2% hysteresis.
      const double median = produced_ < shift_after_ ? 5'000 : 400'000;
      c->add_device_index(0);
      c->add_cpu_class_index(0);
      c->add_opcode(25);
      c->add_bytes(4096);
      c->add_wait_ns(static_cast<uint64_t>(
          std::lognormal_distribution<double>(std::log(median), 0.2)(rng_)));
      c->add_path(v1::WAIT_PATH_IRQ);
      c->add_flags(0);
    }
    return n;
  }

 private:
  uint64_t shift_after_;
  uint64_t produced_ = 0;
  std::mt19937_64 rng_{9};
};

TEST(Drift, TunerDetectsTheShiftAndPushesANewTable) {
  testing::TempDir dir;
  TunerOptions options;
  options.db_path = dir.File("tuner.db");
  options.refit_samples = 2048;
  options.store.window_samples = 2048;
  auto tuner = TunerServer::Start("127.0.0.1:0", options);
  ASSERT_TRUE(tuner.ok()) << tuner.status();

  AgentOptions agent_options;
  agent_options.tuner_address = (*tuner)->address();
  agent_options.agent_id = "shifty";
  agent_options.max_samples = 40000;
  agent_options.batch_size = 512;
  agent_options.give_up_after = absl::Seconds(20);
  // A board measures in real time; fits run beside ingest (tuner/fitter.h),
  // so an unpaced agent could send everything before the first fit.
  agent_options.samples_per_second = 20000;
  auto sink = MakePolicySink("none", {"mmc0"});
  ASSERT_TRUE(sink.ok());
  Agent agent(agent_options, std::make_unique<ShiftingSource>(20000), std::move(*sink));
  ASSERT_TRUE(agent.Run().ok());

  const TunerCounters counters = (*tuner)->core()->counters();
  EXPECT_GE(counters.changes_detected, 1u);
  EXPECT_GE(counters.policy_versions, 2u);
  auto store = Store::Open(options.db_path);
  ASSERT_TRUE(store.ok());
  auto target = (*store)->FindTarget("shifty");
  ASSERT_TRUE(target.ok() && target->has_value());
  auto first = (*store)->LoadPolicy((*target)->id, 1);
  auto latest = (*store)->LoadPolicy((*target)->id, 0);
  ASSERT_TRUE(first.ok() && first->has_value() && latest.ok() && latest->has_value());
  auto entry_of = [](const PolicyTable& t) {
    for (const auto& e : t.entries) {
      if (!e.fallback) return e;
    }
    return PolicyEntry();
  };
  // Before: spin the 5 us waits. After: the fit is on the 400 us waits only
  // (not diluted by the 20,000 fast ones) and no longer spins first.
  EXPECT_EQ(entry_of(**first).wait.strategy, Strategy::kSpinThenIrq);
  const PolicyEntry after = entry_of(**latest);
  EXPECT_GT(after.p50_ns, 300e3);
  EXPECT_LT(after.samples, 25000u);
  EXPECT_TRUE(after.wait.strategy == Strategy::kIrq ||
              after.wait.strategy == Strategy::kSleepThenSpin ||
              after.wait.strategy == Strategy::kPollSleep)
      << StrategyName(after.wait.strategy);
  EXPECT_EQ(agent.stats().applied_version, (*latest)->version);
  (*tuner)->Shutdown(absl::Seconds(2));
}

// A fleet's agent as loadgen --histograms models it (bench/sim_histograms.h):
// 64 keys of 100 completions per batch, sent as histogram deltas. Key 0
// (opcode 0) slows down 20x from batch `shift_at` on.
class ManyKeysBoard final : public SampleSource {
 public:
  static constexpr uint32_t kKeys = 64;
  static constexpr uint32_t kPerKey = 100;
  ManyKeysBoard(int batches, int shift_at) : batches_(batches), shift_at_(shift_at) {
    Describe(&hello_);
  }
  bool exhausted() const override { return made_ == batches_; }
  void Describe(v1::Hello* hello) const override { DescribeBoard("many-keys-board", hello); }
  absl::StatusOr<size_t> Fill(size_t, v1::SampleBatch* batch) override {
    if (made_ == batches_) return 0;
    const uint32_t slow_keys = made_++ >= shift_at_ ? 1 : 0;
    return AppendSimHistograms(hello_, kKeys, kPerKey, rng_, batch, slow_keys, 20);
  }

 private:
  v1::Hello hello_;
  int batches_;
  int shift_at_;
  int made_ = 0;
  std::mt19937_64 rng_{11};
};

// Each key has 1/64 of its target's samples, about 128 of each 8192-sample
// window (the default): never the 512 one window must hold to be judged.
// The detector judges its latest windows together, so the tuner still finds
// the key that changed, and only that one.
TEST(Drift, AKeyWithASmallShareOfAHistogramAgentsSamplesIsWatchedToo) {
  testing::TempDir dir;
  TunerOptions options;
  options.db_path = dir.File("tuner.db");
  options.refit_samples = ManyKeysBoard::kKeys * ManyKeysBoard::kPerKey;  // every batch
  auto tuner = TunerServer::Start("127.0.0.1:0", options);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  AgentOptions agent_options;
  agent_options.tuner_address = (*tuner)->address();
  agent_options.agent_id = "many-keys";
  agent_options.give_up_after = absl::Seconds(20);
  agent_options.drain_timeout = testing::kEventDeadline;  // waits for the final table
  auto sink = MakePolicySink("none", {"mmc0"});
  ASSERT_TRUE(sink.ok());
  Agent agent(agent_options, std::make_unique<ManyKeysBoard>(24, 12), std::move(*sink));
  ASSERT_TRUE(agent.Run().ok());
  EXPECT_EQ(agent.stats().batches_acked, 24u);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((*tuner)->core()->counters().changes_detected == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ((*tuner)->core()->counters().changes_detected, 1u);
  (*tuner)->Shutdown(absl::Seconds(5));
  auto store = Store::Open(options.db_path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto target = (*store)->FindTarget("many-keys");
  ASSERT_TRUE(target.ok() && target->has_value());
  auto drift = (*store)->LoadDriftWindows((*target)->id);
  ASSERT_TRUE(drift.ok()) << drift.status();
  ASSERT_EQ(drift->size(), 1u);
  EXPECT_EQ(drift->begin()->first, (PolicyKey{"cpu", "mmc0", 0, 13}));
  // Batch 12 starts at sample 12 x 6,400 = 76,800, in window 9 of 0-18:
  // the recent evidence starts at most a window before that (a detector that
  // runs early), or later (one that runs late: the fewest latest window rows
  // holding 512 samples of the key, each row about 4 windows).
  EXPECT_GE(drift->begin()->second, 8u);
  EXPECT_LE(drift->begin()->second, 18u);
  // The key's evidence is what came after the change (20 x 20 us): all 12
  // batches of it when the detector marks the change where it happened,
  // fewer when it marks it later. The others' evidence is all of theirs.
  auto keys = (*store)->LoadKeys((*target)->id);
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_EQ(keys->size(), ManyKeysBoard::kKeys);
  for (const auto& k : *keys) {
    if (k.key == drift->begin()->first) {
      EXPECT_GT(k.histogram.QuantileNs(0.5), 200e3);
      EXPECT_LE(k.histogram.total_count(), 12u * ManyKeysBoard::kPerKey);
    } else {
      EXPECT_EQ(k.histogram.total_count(), 24u * ManyKeysBoard::kPerKey);
    }
  }
}

}  // namespace
}  // namespace spintune
