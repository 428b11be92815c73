// Test support: databases on the throw-away PostgreSQL cluster of the tests
// (tools/pg_test_cluster.sh). Under CTest the cluster is a fixture
// (PgTestCluster.Start/Stop, storage/CMakeLists.txt) shared by every test
// process; a test binary run by hand starts its own and stops it at exit.
//
// Thread-safety: call from the test's main thread.
#ifndef SPINTUNE_STORAGE_PG_TEST_CLUSTER_H_
#define SPINTUNE_STORAGE_PG_TEST_CLUSTER_H_

#include <string>

#include "absl/status/statusor.h"

namespace spintune {

// The directory of the cluster's Unix socket. Unavailable, with the reason
// to skip on, when no PostgreSQL server is installed.
absl::StatusOr<std::string> PostgresTestSocketDir();

// A new empty database on the cluster: its URI (user postgres, trusted).
absl::StatusOr<std::string> FreshPostgresDatabase();

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_PG_TEST_CLUSTER_H_
