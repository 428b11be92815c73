#include "storage/pg_test_cluster.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/sql_db.h"

namespace spintune {
namespace {

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool Running(const std::string& dir) {
  return !dir.empty() && std::filesystem::exists(dir + "/.s.PGSQL.5432");
}

// Runs tools/pg_test_cluster.sh ACTION STATE; what it printed, or why it
// failed.
absl::StatusOr<std::string> Script(const char* action, const std::string& state) {
  const std::string command =
      absl::StrCat(SPINTUNE_SOURCE_DIR "/tools/pg_test_cluster.sh ", action, " '", state, "' 2>&1");
  FILE* out = popen(command.c_str(), "r");
  if (out == nullptr) return absl::InternalError("popen failed");
  std::string said;
  char buf[256];
  while (fgets(buf, sizeof(buf), out)) said += buf;
  if (pclose(out) != 0) return absl::InternalError(absl::StrCat(command, " failed: ", said));
  return said;
}

// A new cluster's socket directory (written into `state`).
absl::StatusOr<std::string> StartCluster(const std::string& state) {
  SPINTUNE_ASSIGN_OR_RETURN(std::string said, Script("start", state));
  const std::string dir = ReadLine(state);
  if (!Running(dir)) {
    return absl::UnavailableError(absl::StrCat("no PostgreSQL test cluster: ", said));
  }
  return dir;
}

std::string StatePath(const char* what) {
  static int made = 0;
  return absl::StrCat(std::filesystem::temp_directory_path().string(), "/spintune-pg-", what, "-",
                      getpid(), "-", ++made);
}

std::string* own_state = nullptr;

void StopOwnCluster() {
  if (own_state != nullptr) Script("stop", *own_state).IgnoreError();
}

}  // namespace

absl::StatusOr<std::string> PostgresTestSocketDir() {
  static const absl::StatusOr<std::string>* dir = [] {
    // The CTest fixture's cluster.
    if (const char* build = std::getenv("SPINTUNE_BUILD_DIR")) {
      const std::string shared = ReadLine(absl::StrCat(build, "/pg-test-cluster"));
      if (Running(shared)) return new absl::StatusOr<std::string>(shared);
    }
    // Else one of this process's own, stopped at exit.
    own_state = new std::string(StatePath("own"));
    std::atexit(StopOwnCluster);
    return new absl::StatusOr<std::string>(StartCluster(*own_state));
  }();
  return *dir;
}

absl::StatusOr<std::string> FreshPostgresDatabase(const std::string& socket_dir) {
  std::string dir = socket_dir;
  if (dir.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(dir, PostgresTestSocketDir());
  }
  static int made = 0;
  const std::string name = absl::StrCat("t", getpid(), "_", ++made);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto admin, OpenSqlDb(absl::StrCat("postgresql:///postgres?host=", dir, "&user=postgres")));
  SPINTUNE_RETURN_IF_ERROR(admin->Exec(absl::StrCat("CREATE DATABASE ", name)));
  return absl::StrCat("postgresql:///", name, "?host=", dir, "&user=postgres");
}

absl::StatusOr<std::unique_ptr<PrivatePostgresCluster>> PrivatePostgresCluster::Start() {
  const std::string state = StatePath("private");
  auto dir = StartCluster(state);
  if (!dir.ok()) {
    Script("stop", state).IgnoreError();
    return dir.status();
  }
  return std::unique_ptr<PrivatePostgresCluster>(new PrivatePostgresCluster(state, *dir));
}

PrivatePostgresCluster::~PrivatePostgresCluster() { Script("stop", state_).IgnoreError(); }

absl::Status PrivatePostgresCluster::Pause() { return Script("pause", state_).status(); }

absl::Status PrivatePostgresCluster::Resume() { return Script("resume", state_).status(); }

}  // namespace spintune
