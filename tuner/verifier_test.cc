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
// `version`'s waits cost.
BatchDelta Window(uint64_t seq, uint64_t completion_ns, uint64_t version, double j_ns) {
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
  o.moments = Measured(kWindow, j_ns);
  b.outcomes.push_back(o);
  return b;
}

// Two windows under the default rule (J 60 us), then version 1 applied and
// measured over two windows at J 80 us (worse), its completion times
// `after_ns` where they were 10 us before. Returns the verification.
absl::StatusOr<VerifyResult> BeforeAfter(Store& store, uint64_t after_ns) {
  const TargetRecord board = Board();
  SPINTUNE_ASSIGN_OR_RETURN(int64_t id, store.UpsertTarget(board));
  PolicyTable t = SpinningTable(board);
  SPINTUNE_RETURN_IF_ERROR(store.AppendPolicyVersion(id, &t).status());
  uint64_t seq = 0;
  for (int i = 0; i < 2; ++i) {
    SPINTUNE_RETURN_IF_ERROR(store.IngestBatch(id, Window(++seq, 10'000, 0, 60'000)).status());
  }
  SPINTUNE_RETURN_IF_ERROR(store.RecordApplied(id, 1, ""));
  for (int i = 0; i < 2; ++i) {
    SPINTUNE_RETURN_IF_ERROR(store.IngestBatch(id, Window(++seq, after_ns, 1, 80'000)).status());
  }
  // As the fitter does before each verification (tuner/fitter.cc).
  SPINTUNE_RETURN_IF_ERROR(store.DetectChanges(id, ChangeTest()).status());
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

}  // namespace
}  // namespace spintune
