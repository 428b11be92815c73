#include "tuner/verifier.h"

#include "common/status_macros.h"
#include "gtest/gtest.h"

namespace spintune {
namespace {

// Windows of 1000 samples: each batch below fills one.
constexpr uint64_t kWindow = 1000;
const PolicyKey kKey{"little", "mmc0", 17, 10};

TargetRecord Board() {
  TargetRecord r;
  r.agent_id = "verifier-board";
  r.board = "test";
  r.cpu_model = "test";
  r.cpu_classes = {{"little", 1'000'000, {20'000, 30'000, 1'000, 2'000, 20'000}, 0}};
  DefaultRule irq;
  irq.wait = WaitParams::Irq();
  r.devices = {{"mmc0", "test-mmc", "card", {irq}}};
  return r;
}

// Version 1 spins then blocks on kKey (its incumbent, the default rule,
// blocks).
PolicyTable SpinningTable(const TargetRecord& board) {
  PolicyTable t;
  t.board = board.board;
  t.cpu_classes = {{"little", 1'000'000, {}}};
  t.devices = board.devices;
  PolicyEntry e;
  e.key = kKey;
  e.wait = WaitParams::SpinThenIrq(8'000);
  e.samples = 2 * kWindow;
  e.expected_cost_ns = 50'000;
  t.entries.push_back(e);
  PolicyEntry fallback;
  fallback.key = {kAnyCpuClass, "mmc0", 0, 0};
  fallback.fallback = true;
  fallback.wait = WaitParams::Irq();
  t.entries.push_back(fallback);
  return t;
}

// n requests of J ~ `j_ns` (CPU j/2, latency j/2, +-10%).
CostMoments Measured(uint64_t n, double j_ns) {
  CostMoments m;
  for (uint64_t i = 0; i < n; ++i) {
    const double x = j_ns / 2 * (i % 2 ? 1.1 : 0.9);
    m.Add(x, x);
  }
  return m;
}

// One window of kKey: its completions (all `completion_ns`) and what
// `version`'s waits cost: J `j_ns` on the table arm, and when
// `incumbent_j_ns` > 0 half the requests on the incumbent arm at that J.
BatchDelta Window(uint64_t seq, uint64_t completion_ns, uint64_t version, double j_ns,
                  double incumbent_j_ns = 0) {
  BatchDelta b;
  b.seq = seq;
  KeyEvidence k;
  k.key = kKey;
  k.histogram.Record(completion_ns, kWindow);
  k.irq_path = kWindow;
  b.keys.push_back(k);
  b.completion_samples = kWindow;
  OutcomeRecord o;
  o.key = kKey;
  o.version = version;
  o.moments = Measured(incumbent_j_ns > 0 ? kWindow / 2 : kWindow, j_ns);
  b.outcomes.push_back(o);
  if (incumbent_j_ns > 0) {
    o.arm = OutcomeArm::kIncumbent;
    o.moments = Measured(kWindow / 2, incumbent_j_ns);
    b.outcomes.push_back(o);
  }
  return b;
}

// Two windows under the default rule (J 60 us), then version 1 applied and
// measured over two windows at J `table_j_ns` (80 us: worse), its
// completion times `after_ns` where they were 10 us before. With
// `incumbent_j_ns` > 0, version 1 has an A/B trial of the default's wait
// and half its requests measured that J. Returns the verification.
absl::StatusOr<VerifyResult> BeforeAfter(Store& store, uint64_t after_ns,
                                         double table_j_ns = 80'000,
                                         double incumbent_j_ns = 0) {
  const TargetRecord board = Board();
  SPINTUNE_ASSIGN_OR_RETURN(int64_t id, store.UpsertTarget(board));
  PolicyTable t = SpinningTable(board);
  if (incumbent_j_ns > 0) t.entries[0].trial = Trial{WaitParams::Irq(), 128};
  SPINTUNE_RETURN_IF_ERROR(store.AppendPolicyVersion(id, &t, /*based_on=*/0).status());
  uint64_t seq = 0;
  for (int i = 0; i < 2; ++i) {
    SPINTUNE_RETURN_IF_ERROR(store.IngestBatch(id, Window(++seq, 10'000, 0, 60'000)).status());
  }
  SPINTUNE_RETURN_IF_ERROR(store.RecordApplied(id, 1, ""));
  for (int i = 0; i < 2; ++i) {
    SPINTUNE_RETURN_IF_ERROR(
        store.IngestBatch(id, Window(++seq, after_ns, 1, table_j_ns, incumbent_j_ns)).status());
  }
  // No drift detection before: the verifier runs the detector itself.
  VerifierOptions options;
  options.min_requests = 1000;
  return VerifyTarget(store, id, options);
}

StoreOptions SmallWindows() {
  StoreOptions o;
  o.window_samples = kWindow;
  return o;
}

TEST(Verifier, BeforeAfterWithoutDriftRollsBackAWorseKey) {
  auto store = Store::Open(":memory:", SmallWindows());
  ASSERT_TRUE(store.ok()) << store.status();
  auto result = BeforeAfter(**store, 10'000);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->decided.size(), 1u);
  const VerificationRecord& v = result->decided[0];
  EXPECT_EQ(v.verdict, "worse") << v.reason;
  EXPECT_EQ(v.method, "before_after");
  EXPECT_EQ(v.incumbent_version, 0u);
  EXPECT_EQ(v.rollback_version, 2u) << v.reason;
  ASSERT_TRUE(result->rollback.has_value());
  EXPECT_EQ(result->rollback->origin, "verify-rollback");
}

// The completion times quadrupled between the default rule's windows and
// version 1's: the same measured costs no longer say the table was worse.
TEST(Verifier, ADriftBetweenTheWindowsMakesBeforeAfterInconclusive) {
  auto store = Store::Open(":memory:", SmallWindows());
  ASSERT_TRUE(store.ok()) << store.status();
  auto result = BeforeAfter(**store, 40'000);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->decided.size(), 1u);
  const VerificationRecord& v = result->decided[0];
  EXPECT_EQ(v.verdict, "inconclusive") << v.reason;
  EXPECT_NE(v.reason.find("drifted"), std::string::npos) << v.reason;
  EXPECT_EQ(v.rollback_version, 0u);
  EXPECT_FALSE(result->rollback.has_value());
  EXPECT_EQ(result->drifted, std::vector<PolicyKey>{kKey}) << "for the next refit's held keys";
  auto stored = (*store)->ListVerifications(1);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].verdict, "inconclusive");
  auto held = (*store)->ListHeldKeys(1);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->empty()) << "nothing rolled back, nothing held";
  auto latest = (*store)->LoadPolicy(1, 0);
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->version, 1u) << "no rollback version";
}

// A/B: version 1 sends half of kKey's commands to the default's wait. The
// completion times quadrupled in its windows and both arms cost more than
// the default did (a drift), but the table arm costs more than the
// incumbent arm measured beside it: worse, rolled back, trial dropped.
TEST(Verifier, AbArmsInOneWindowSeeThroughADrift) {
  auto store = Store::Open(":memory:", SmallWindows());
  ASSERT_TRUE(store.ok()) << store.status();
  auto result = BeforeAfter(**store, 40'000, /*table_j_ns=*/90'000, /*incumbent_j_ns=*/70'000);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->decided.size(), 1u);
  const VerificationRecord& v = result->decided[0];
  EXPECT_EQ(v.verdict, "worse") << v.reason;
  EXPECT_EQ(v.method, "ab");
  EXPECT_NEAR(v.incumbent.mean_ns, 70'000, 1'000);
  EXPECT_EQ(v.rollback_version, 2u) << v.reason;
  ASSERT_TRUE(result->rollback.has_value());
  EXPECT_EQ(result->rollback->origin, "verify-rollback");
  EXPECT_EQ(result->rollback->entries[0].wait, WaitParams::Irq());
  EXPECT_FALSE(result->rollback->entries[0].trial.has_value()) << "decided: no trial";
  auto stored = (*store)->ListVerifications(1);
  ASSERT_TRUE(stored.ok() && stored->size() == 1u);
  EXPECT_EQ((*stored)[0].method, "ab");
}

// The same drift with the table arm cheaper than the incumbent arm (while
// both cost more than the default did before): better. The trial is
// settled: a version without it follows, the table's wait kept.
TEST(Verifier, AbBetterVerdictDropsTheTrialInASettledVersion) {
  auto store = Store::Open(":memory:", SmallWindows());
  ASSERT_TRUE(store.ok()) << store.status();
  auto result = BeforeAfter(**store, 40'000, /*table_j_ns=*/70'000, /*incumbent_j_ns=*/90'000);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->decided.size(), 1u);
  EXPECT_EQ(result->decided[0].verdict, "better") << result->decided[0].reason;
  EXPECT_EQ(result->decided[0].method, "ab");
  EXPECT_EQ(result->decided[0].rollback_version, 0u);
  ASSERT_TRUE(result->rollback.has_value());
  EXPECT_EQ(result->rollback->origin, "verify-settled");
  EXPECT_EQ(result->rollback->version, 2u);
  EXPECT_EQ(result->rollback->entries[0].wait, WaitParams::SpinThenIrq(8'000));
  EXPECT_FALSE(result->rollback->entries[0].trial.has_value());
  auto held = (*store)->ListHeldKeys(1);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->empty());
}

// A changed key gets a trial of the wait in force before; an unchanged key
// keeps an undecided trial and loses a decided one; share 0 attaches none.
TEST(Verifier, AttachTrialsTrialsChangedKeysUntilDecided) {
  auto store = Store::Open(":memory:", SmallWindows());
  ASSERT_TRUE(store.ok()) << store.status();
  const TargetRecord board = Board();
  auto id = (*store)->UpsertTarget(board);
  ASSERT_TRUE(id.ok());
  PolicyTable fit = SpinningTable(board);
  ASSERT_TRUE(AttachTrials(**store, *id, nullptr, 0, &fit).ok());
  EXPECT_FALSE(fit.entries[0].trial.has_value()) << "share 0: off";
  ASSERT_TRUE(AttachTrials(**store, *id, nullptr, 64, &fit).ok());
  ASSERT_TRUE(fit.entries[0].trial.has_value()) << "changed from the default rule";
  EXPECT_EQ(*fit.entries[0].trial, (Trial{WaitParams::Irq(), 64}));
  EXPECT_FALSE(fit.entries[1].trial.has_value()) << "never on the fallback";
  ASSERT_TRUE((*store)->AppendPolicyVersion(*id, &fit, /*based_on=*/0).ok());

  PolicyTable refit = SpinningTable(board);  // the same wait again
  ASSERT_TRUE(AttachTrials(**store, *id, &fit, 64, &refit).ok());
  ASSERT_TRUE(refit.entries[0].trial.has_value()) << "undecided: kept";
  VerificationRecord v;
  v.key = kKey;
  v.version = fit.version;
  v.verdict = "better";
  ASSERT_TRUE((*store)->RecordVerification(*id, v).ok());
  ASSERT_TRUE(AttachTrials(**store, *id, &fit, 64, &refit).ok());
  EXPECT_FALSE(refit.entries[0].trial.has_value()) << "decided: dropped";
  refit.entries[0].wait = WaitParams::Spin(30'000);
  ASSERT_TRUE(AttachTrials(**store, *id, &fit, 64, &refit).ok());
  ASSERT_TRUE(refit.entries[0].trial.has_value()) << "changed again: a new trial";
  EXPECT_EQ(refit.entries[0].trial->wait, WaitParams::SpinThenIrq(8'000));
}

}  // namespace
}  // namespace spintune
