// Every push is an experiment (issue #12): a simulated board whose true
// timer oversleep is five times what it declares. The fit on the declared
// costs pushes a sleeping wait that the driver's measured outcomes show to
// be worse than the default it replaced; the tuner rolls the key back within
// the verification window, holds it, and the next fit — over the oversleep
// the driver measured — is verified better than the default.
//
// The board, by construction (1 GHz, so cycles are ns; lambda = 1):
//   completion X: half the requests ~5 us, half ~40 us; default rule IRQ.
//   irq_cpu 20 us, irq_wake 30 us, poll 1 us, timer_cpu 2 us, declared
//   timer oversleep 20 us, true oversleep exponential with mean 100 us.
//   IRQ:                  J = 20 + E[X] + 30                    = 72.5 us
//   SPIN_THEN_IRQ(~6 us): fast 5 + 5, slow (6 + 20) + (40 + 30)  = 53 us
//   SLEEP_THEN_SPIN(0):   declared: fast 3 + 20, slow 23 + 40    = 43 us
//                         true (tw ~ Exp(100 us)): fast ~103, slow ~117
//                                                                = ~110 us
// So the first fit sleeps (43 < 53 < 72.5 predicted), the driver measures
// ~110 us against the default's 72.5 (worse: rolled back to IRQ), and with
// the measured oversleep the fit spins then blocks (53 us: better).
#include <thread>

#include "agent/agent.h"
#include "agent/policy_sink.h"
#include "agent/sim_source.h"
#include "gtest/gtest.h"
#include "storage/store.h"
#include "tests/testing/temp_dir.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

BoardModel WrongTimerBoard() {
  BoardModel b;
  b.name = "wrong-timer-board";
  b.summary = "declares a 20 us timer oversleep; really 100 us";
  b.cpu_model = "test";
  b.cpu_khz = 1'000'000;  // cycles are ns
  b.device_name = "mmc0";
  b.driver = "test-mmc";
  b.device_model = "test card";
  b.irq_overhead_cycles = 15'000;
  b.irq_handler_cycles = 5'000;
  b.irq_wake_cycles = 30'000;
  b.poll_read_cycles = 1'000;
  b.timer_cpu_cycles = 2'000;
  b.timer_wake_ns = 20'000;
  OpcodeModel op;
  op.opcode = 17;
  op.name = "CMD17";
  op.sizes = {{512, 1.0}};
  op.device_median_ns = 5'000;
  op.device_sigma = 0.05;
  op.slow_share = 0.5;
  op.slow_median_ns = 40'000;
  op.slow_sigma = 0.05;
  b.opcodes = {op};
  DefaultRule irq;
  irq.wait = WaitParams::Irq();
  irq.note = "always block";
  b.default_rules = {irq};
  return b;
}

TEST(Verification, AWrongModelIsRolledBackAndTheLearntFitVerifiedBetter) {
  testing::TempDir dir;
  TunerOptions options;
  options.db_path = dir.File("tuner.db");
  options.refit_samples = 4096;
  options.verify.min_requests = 1000;
  options.verify.max_requests = 8000;
  auto tuner = TunerServer::Start("127.0.0.1:0", options);
  ASSERT_TRUE(tuner.ok()) << tuner.status();

  const BoardModel board = WrongTimerBoard();
  auto source = std::make_unique<SimSource>(board, 3, /*timer_wake_factor=*/5.0);
  auto sink = MakePolicySink("none", {"mmc0"});
  ASSERT_TRUE(sink.ok());
  AgentOptions o;
  o.tuner_address = (*tuner)->address();
  o.agent_id = "wrong-timer";
  o.max_samples = 40000;
  o.batch_size = 250;
  o.samples_per_second = 20000;  // in real time: fits and verdicts keep up
  o.give_up_after = absl::Seconds(20);
  Agent agent(o, std::move(source), std::move(*sink));
  ASSERT_TRUE(agent.Run().ok());
  (*tuner)->Shutdown(absl::Seconds(2));

  auto store = Store::Open(options.db_path, {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok());
  auto target = (*store)->FindTarget("wrong-timer");
  ASSERT_TRUE(target.ok() && target->has_value());
  const int64_t id = (*target)->id;
  auto verdicts = (*store)->ListVerifications(id);
  ASSERT_TRUE(verdicts.ok());
  std::string all;
  for (const auto& v : *verdicts) {
    all += absl::StrCat("v", v.version, " ", v.verdict, ": ", v.reason, "\n");
  }
  ASSERT_GE(verdicts->size(), 2u) << all;
  // First: the sleeping wait, measured worse than the default (version 0),
  // rolled back within the window.
  const VerificationRecord& first = verdicts->front();
  EXPECT_EQ(first.verdict, "worse") << all;
  EXPECT_EQ(first.incumbent_version, 0u) << all;
  EXPECT_LT(first.requests, 2 * options.verify.min_requests) << "decided in the window: " << all;
  ASSERT_NE(first.rollback_version, 0u) << all;
  auto pushed = (*store)->LoadPolicy(id, first.version);
  auto rolled = (*store)->LoadPolicy(id, first.rollback_version);
  ASSERT_TRUE(pushed.ok() && pushed->has_value() && rolled.ok() && rolled->has_value());
  EXPECT_EQ((*rolled)->origin, "verify-rollback");
  auto wait_of = [](const PolicyTable& t) {
    for (const auto& e : t.entries) {
      if (!e.fallback) return e.wait;
    }
    return WaitParams();
  };
  const Strategy first_strategy = wait_of(**pushed).strategy;
  EXPECT_TRUE(first_strategy == Strategy::kSleepThenSpin || first_strategy == Strategy::kPollSleep)
      << StrategyName(first_strategy);
  EXPECT_EQ(wait_of(**rolled).strategy, Strategy::kIrq);
  // The prediction was far from what was measured (the model was wrong).
  EXPECT_GT(first.measured.mean_ns, 1.5 * first.predicted_cost_ns) << all;
  // Later: a fit over the measured oversleep, verified better than blocking.
  const VerificationRecord& last = verdicts->back();
  EXPECT_EQ(last.verdict, "better") << all;
  EXPECT_GT(last.version, first.rollback_version) << all;
  auto learnt = (*store)->LoadPolicy(id, last.version);
  ASSERT_TRUE(learnt.ok() && learnt->has_value());
  EXPECT_EQ(wait_of(**learnt).strategy, Strategy::kSpinThenIrq) << all;
  // Measured within 15% of what that fit predicted.
  EXPECT_NEAR(last.measured.mean_ns, last.predicted_cost_ns, 0.15 * last.measured.mean_ns) << all;
  auto timers = (*store)->LoadTimerOversleep(id);
  ASSERT_TRUE(timers.ok() && timers->size() == 1u);
  EXPECT_NEAR((*timers)[0].oversleep.MeanNs(), 100e3, 10e3) << "the learnt oversleep";
}

}  // namespace
}  // namespace spintune
