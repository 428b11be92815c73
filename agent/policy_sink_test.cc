#include "agent/policy_sink.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "policy/policy_blob.h"
#include "tests/testing/policy_fixtures.h"

namespace spintune {
namespace {

namespace fs = std::filesystem;

TEST(PolicySink, FileSinkReplacesAtomicallyAndVerifies) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("sink_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto sink = MakePolicySink("file:" + (dir / "{device}.bin").string(), {"mmc0", "spi0"});
  ASSERT_TRUE(sink.ok()) << sink.status();
  auto blob = EncodePolicyBlob(testing::SampleTable(), "mmc0");
  ASSERT_TRUE(blob.ok());
  ASSERT_TRUE((*sink)->Apply("mmc0", *blob).ok());
  std::ifstream in(dir / "mmc0.bin", std::ios::binary);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), *blob);
  // No temporary file is left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
  fs::remove_all(dir);
}

TEST(PolicySink, FilePathNeedsDevicePlaceholderForSeveralDevices) {
  EXPECT_EQ(MakePolicySink("file:/tmp/x.bin", {"a", "b"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MakePolicySink("file:/tmp/x.bin", {"a"}).ok());
  EXPECT_FALSE(MakePolicySink("bogus:x", {"a"}).ok());
}

TEST(PolicySink, UnwritableDirectoryIsAnError) {
  auto sink = MakePolicySink("file:/nonexistent-dir/x.bin", {"mmc0"});
  ASSERT_TRUE(sink.ok());
  auto blob = EncodePolicyBlob(testing::SampleTable(), "mmc0");
  EXPECT_FALSE((*sink)->Apply("mmc0", *blob).ok());
}

}  // namespace
}  // namespace spintune
