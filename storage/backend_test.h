// Test support: storage tests run against both backends as parameterised
// tests (TEST_P on BackendTest, INSTANTIATE_SPINTUNE_BACKENDS). PostgreSQL
// cases skip, saying why, only where no PostgreSQL server is installed.
#ifndef SPINTUNE_STORAGE_BACKEND_TEST_H_
#define SPINTUNE_STORAGE_BACKEND_TEST_H_

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/pg_test_cluster.h"

namespace spintune {

enum class Backend { kSqlite, kPostgres };

class BackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kPostgres) {
      SPINTUNE_POSTGRES_OR_SKIP(dir);
    }
  }
  void TearDown() override {
    for (const auto& f : files_) {
      for (const char* suffix : {"", "-wal", "-shm", "-leases"}) std::filesystem::remove(f + suffix);
    }
  }
  bool postgres() const { return GetParam() == Backend::kPostgres; }
  // A new empty database of the backend under test: SQLite in memory (a
  // temporary file when `file`, to reopen it), or a new PostgreSQL database.
  std::string NewDb(bool file = false) {
    if (postgres()) {
      auto uri = FreshPostgresDatabase();
      if (!uri.ok()) ADD_FAILURE() << uri.status();
      return uri.ok() ? *uri : std::string();
    }
    if (!file) return ":memory:";
    const std::string path =
        absl::StrCat(::testing::TempDir(), "/backend_test_", getpid(), "_", files_.size(), ".db");
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    files_.push_back(path);
    return path;
  }

 private:
  std::vector<std::string> files_;
};

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "SQLite" : "PostgreSQL";
}

#define INSTANTIATE_SPINTUNE_BACKENDS(suite)                                        \
  INSTANTIATE_TEST_SUITE_P(Backend, suite,                                          \
                           ::testing::Values(Backend::kSqlite, Backend::kPostgres), \
                           BackendName)

}  // namespace spintune

#endif  // SPINTUNE_STORAGE_BACKEND_TEST_H_
