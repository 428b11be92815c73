// A fresh directory under the test temp dir, removed at scope exit.
#ifndef SPINTUNE_TESTS_TESTING_TEMP_DIR_H_
#define SPINTUNE_TESTS_TESTING_TEMP_DIR_H_

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace spintune::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("spintune_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_TEMP_DIR_H_
