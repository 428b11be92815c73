#include "storage/pg_test_cluster.h"

#include <unistd.h>

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

std::string Script(const char* action, const std::string& state) {
  return absl::StrCat(SPINTUNE_SOURCE_DIR "/tools/pg_test_cluster.sh ", action, " '", state, "'");
}

std::string& PrivateState() {
  static std::string* state = new std::string();
  return *state;
}

void StopPrivateCluster() {
  if (!PrivateState().empty()) {
    std::system((Script("stop", PrivateState()) + " >/dev/null 2>&1").c_str());
  }
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
    PrivateState() = absl::StrCat(std::filesystem::temp_directory_path().string(), "/spintune-pg-state-", getpid());
    const std::string command = Script("start", PrivateState());
    FILE* out = popen(command.c_str(), "r");
    std::string said;
    char buf[256];
    while (out && fgets(buf, sizeof(buf), out)) said += buf;
    const int rc = out ? pclose(out) : -1;
    std::atexit(StopPrivateCluster);
    const std::string own = ReadLine(PrivateState());
    if (rc == 0 && Running(own)) return new absl::StatusOr<std::string>(own);
    return new absl::StatusOr<std::string>(absl::UnavailableError(
        absl::StrCat("no PostgreSQL test cluster: ", said.empty() ? command + " failed" : said)));
  }();
  return *dir;
}

absl::StatusOr<std::string> FreshPostgresDatabase() {
  SPINTUNE_ASSIGN_OR_RETURN(std::string dir, PostgresTestSocketDir());
  static int made = 0;
  const std::string name = absl::StrCat("t", getpid(), "_", ++made);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto admin, OpenSqlDb(absl::StrCat("postgresql:///postgres?host=", dir, "&user=postgres")));
  SPINTUNE_RETURN_IF_ERROR(admin->Exec(absl::StrCat("CREATE DATABASE ", name)));
  return absl::StrCat("postgresql:///", name, "?host=", dir, "&user=postgres");
}

}  // namespace spintune
