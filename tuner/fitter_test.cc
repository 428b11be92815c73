// Fitter: the target lease that keeps tuners sharing one database from
// storing competing versions of a target (issue 14) covers verifications,
// which may store a rollback, as well as refits.
#include "tuner/fitter.h"

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/pg_test_cluster.h"

namespace spintune {
namespace {

TargetRecord Board() {
  TargetRecord r;
  r.agent_id = "leased-board";
  r.board = "litex-rocket-50mhz";
  r.cpu_classes = {{"rocket", 50'000, {1000, 2000, 30, 400, 5000}, 600}};
  r.devices = {{"mmc0", "litex-mmc", "card", {}}};
  return r;
}

TEST(Fitter, AVerificationWaitsForTheLeaseAnotherTunerHolds) {
  SPINTUNE_POSTGRES_OR_SKIP(dir);
  auto uri = FreshPostgresDatabase();
  ASSERT_TRUE(uri.ok()) << uri.status();
  auto store = Store::Open(*uri);
  ASSERT_TRUE(store.ok()) << store.status();
  auto id = (*store)->UpsertTarget(Board());
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

}  // namespace
}  // namespace spintune
