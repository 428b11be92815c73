// Test support: databases on throw-away PostgreSQL clusters
// (tools/pg_test_cluster.sh). Under CTest the shared cluster is a fixture
// (PgTestCluster.Start/Stop, storage/CMakeLists.txt) used by every test
// process; a test binary run by hand starts its own and stops it at exit.
//
// Thread-safety: call from the test's main thread.
#ifndef SPINTUNE_STORAGE_PG_TEST_CLUSTER_H_
#define SPINTUNE_STORAGE_PG_TEST_CLUSTER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace spintune {

// The directory of the shared cluster's Unix socket. Unavailable, with the
// reason to skip on, when no PostgreSQL server is installed.
absl::StatusOr<std::string> PostgresTestSocketDir();

// In a test body or SetUp(): declares std::string `var`, the shared
// cluster's socket directory. Skips the test, saying why, where no
// PostgreSQL server is installed; fails it when the cluster did not start.
#define SPINTUNE_POSTGRES_OR_SKIP(var)                                            \
  std::string var;                                                                \
  {                                                                               \
    auto spintune_pg_dir_ = ::spintune::PostgresTestSocketDir();                  \
    if (absl::IsUnavailable(spintune_pg_dir_.status())) {                         \
      GTEST_SKIP() << spintune_pg_dir_.status().message();                        \
    }                                                                             \
    ASSERT_TRUE(spintune_pg_dir_.ok()) << spintune_pg_dir_.status();              \
    var = *spintune_pg_dir_;                                                      \
  }

// A new empty database on the cluster listening in `socket_dir` (default:
// the shared one): its URI (user postgres, trusted).
absl::StatusOr<std::string> FreshPostgresDatabase(const std::string& socket_dir = "");

// A cluster of one test's own, for stopping its server under a tuner.
// Removed by the destructor.
class PrivatePostgresCluster {
 public:
  // Unavailable as PostgresTestSocketDir().
  static absl::StatusOr<std::unique_ptr<PrivatePostgresCluster>> Start();
  ~PrivatePostgresCluster();
  const std::string& socket_dir() const { return socket_dir_; }
  // Stops the server as a crash would (connections cut, new ones refused).
  absl::Status Pause();
  absl::Status Resume();

 private:
  PrivatePostgresCluster(std::string state, std::string socket_dir)
      : state_(std::move(state)), socket_dir_(std::move(socket_dir)) {}
  std::string state_;
  std::string socket_dir_;
};

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_PG_TEST_CLUSTER_H_
