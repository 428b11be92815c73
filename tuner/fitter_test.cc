// Fitter: the target lease that keeps tuners sharing one database from
// storing competing versions of a target (issue 14) covers verifications,
// which may store a rollback, as well as refits.
#include "tuner/fitter.h"

#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/pg_test_cluster.h"
#include "tests/testing/store_fixtures.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

// A target's first batch: 1,000 completions of `completion_ns` for `key`.
BatchDelta FirstBatch(const PolicyKey& key, uint64_t completion_ns) {
  BatchDelta b;
  b.seq = 1;
  KeyEvidence k;
  k.key = key;
  k.histogram.Record(completion_ns, 1000);
  b.keys.push_back(k);
  b.completion_samples = 1000;
  return b;
}

TEST(Fitter, AVerificationWaitsForTheLeaseAnotherTunerHolds) {
  SPINTUNE_POSTGRES_OR_SKIP(dir);
  auto uri = FreshPostgresDatabase();
  ASSERT_TRUE(uri.ok()) << uri.status();
  auto store = Store::Open(*uri);
  ASSERT_TRUE(store.ok()) << store.status();
  auto id = (*store)->UpsertTarget(testing::RocketBoard("leased-board"));
  ASSERT_TRUE(id.ok()) << id.status();
  // Another tuner's connection, refitting the target.
  auto other = Store::Open(*uri);
  ASSERT_TRUE(other.ok()) << other.status();
  auto leased = (*other)->LeaseTarget(*id);
  ASSERT_TRUE(leased.ok() && *leased);

  absl::Mutex mu;
  absl::Time delivered;
  absl::Status status = absl::UnknownError("not delivered");
  absl::Notification done;
  FitterOptions options;
  options.db_path = *uri;
  auto fitter = Fitter::Create(options, [&](FitResult r) {
    absl::MutexLock lock(&mu);
    delivered = absl::Now();
    status = r.status;
    done.Notify();
  });
  ASSERT_TRUE(fitter.ok()) << fitter.status();
  (*fitter)->Verify(*id);
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(400)))
      << "verified while another tuner held the target's lease";
  const absl::Time released = absl::Now();
  (*other)->ReleaseTarget(*id);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::MutexLock lock(&mu);
  EXPECT_GE(delivered, released);
  EXPECT_TRUE(status.ok()) << status;
}

// A/B trials (format 3 blobs) go only to agents whose Hello said their
// drivers read format 3: with the default share, a refit that changes a
// key's wait trials it for such an agent and not for one that did not say
// (0: an agent from before the field) or said 2.
TEST(Fitter, TrialsOnlyForAgentsWhoseDriversReadFormat3) {
  const testing::TempDir dir;
  const std::string path = dir.File("trials.db");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  // Completions of 5 us; blocking costs 20 us of CPU and 30 us of latency,
  // the default rule blocks: every fit spins, a changed wait.
  std::map<int64_t, uint32_t> format_of;
  for (uint32_t format : {0u, 2u, 3u}) {
    TargetRecord r;
    r.agent_id = absl::StrCat("says-", format);
    r.board = "test";
    r.cpu_classes = {{"little", 1'000'000, {20'000, 30'000, 1'000, 2'000, 20'000}, 0}};
    DefaultRule irq;
    irq.wait = WaitParams::Irq();
    r.devices = {{"mmc0", "test-mmc", "card", {irq}}};
    r.max_blob_format = format;
    auto id = (*store)->UpsertTarget(r);
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_TRUE((*store)->IngestBatch(*id, FirstBatch({"little", "mmc0", 17, 10}, 5'000)).ok());
    format_of[*id] = format;
  }
  absl::Mutex mu;
  std::map<int64_t, FitResult> results;
  FitterOptions options;
  options.db_path = path;
  ASSERT_EQ(options.verify.ab_share, 128u) << "A/B is the default where supported";
  auto fitter = Fitter::Create(options, [&](FitResult r) {
    absl::MutexLock lock(&mu);
    results[r.target_id] = std::move(r);
  });
  ASSERT_TRUE(fitter.ok()) << fitter.status();
  for (const auto& [id, format] : format_of) (*fitter)->Refit(id, /*force=*/true);
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(
        absl::Condition(+[](std::map<int64_t, FitResult>* r) { return r->size() == 3; },
                        &results),
        absl::Seconds(20)));
  }
  for (const auto& [id, format] : format_of) {
    const FitResult& r = results[id];
    ASSERT_TRUE(r.status.ok()) << r.status;
    ASSERT_TRUE(r.stored.has_value()) << "says " << format;
    const PolicyEntry* e = r.stored->EntryFor({"little", "mmc0", 17, 10});
    ASSERT_NE(e, nullptr);
    EXPECT_NE(e->wait.strategy, Strategy::kIrq) << "the fit changes the key's wait";
    if (format == 3) {
      ASSERT_TRUE(e->trial.has_value()) << "an agent that reads format 3 gets a trial";
      EXPECT_EQ(e->trial->wait, WaitParams::Irq());
      EXPECT_EQ(e->trial->share, 128u);
    } else {
      EXPECT_FALSE(e->trial.has_value()) << "an agent that says " << format << " gets none";
    }
  }
  fitter->reset();
}

// A cold-start prediction is made from the other targets' evidence: the
// requester's own first batches, stored before the prediction ran, are not
// in it (policy/cold_start_evidence.h leaves it out).
TEST(Fitter, AColdStartPredictionLeavesOutTheRequestersOwnSamples) {
  const testing::TempDir dir;
  const std::string path = dir.File("predict.db");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto board = [](const std::string& agent, uint64_t khz) {
    TargetRecord r;
    r.agent_id = agent;
    r.board = agent;
    r.cpu_classes = {{"cpu", khz, {20'000, 30'000, 1'000, 2'000, 20'000}, 0}};
    r.devices = {{"mmc0", "litex-mmc", "card", {}}};
    return r;
  };
  // CMD18 takes 100 us on the card plus 30,000 cycles; the newcomer's own
  // first samples are 5 ms.
  auto store_board = [&](const TargetRecord& r, uint64_t completion_ns) -> int64_t {
    auto id = (*store)->UpsertTarget(r);
    EXPECT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE((*store)->IngestBatch(*id, FirstBatch({"cpu", "mmc0", 18, 12}, completion_ns)).ok());
    return *id;
  };
  store_board(board("known-50", 50'000), 700'000);
  store_board(board("known-100", 100'000), 400'000);
  const TargetRecord newcomer = board("newcomer", 100'000);
  const int64_t newcomer_id = store_board(newcomer, 5'000'000);

  absl::Mutex mu;
  std::optional<FitResult> result;
  FitterOptions options;
  options.db_path = path;
  auto fitter = Fitter::Create(options, [&](FitResult r) {
    absl::MutexLock lock(&mu);
    result = std::move(r);
  });
  ASSERT_TRUE(fitter.ok()) << fitter.status();
  (*fitter)->Predict(newcomer_id, newcomer);
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(
        absl::Condition(+[](std::optional<FitResult>* r) { return r->has_value(); }, &result),
        absl::Seconds(20)));
  }
  ASSERT_TRUE(result->status.ok()) << result->status;
  ASSERT_TRUE(result->predicted);
  ASSERT_TRUE(result->stored.has_value());
  EXPECT_EQ(result->stored->origin, "predicted");
  const PolicyEntry* e = result->stored->EntryFor({"cpu", "mmc0", 18, 12});
  ASSERT_NE(e, nullptr);
  // 100 us + 30,000 cycles at 100 MHz, within a bucket; with the
  // newcomer's 5 ms in the fit it would be far above.
  EXPECT_NEAR(e->p50_ns, 400'000, 0.01 * 400'000);
  fitter->reset();
}

}  // namespace
}  // namespace spintune
