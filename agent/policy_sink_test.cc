#include "agent/policy_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
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

// Refused when the sink is made (the agent's start), naming the path.
TEST(PolicySink, DestinationsThatCannotBeWrittenAreRefusedAtOnce) {
  auto missing_dir = MakePolicySink("file:/nonexistent-dir/x.bin", {"mmc0"});
  EXPECT_EQ(missing_dir.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing_dir.status().message().find("/nonexistent-dir does not exist"),
            std::string::npos)
      << missing_dir.status();
  auto missing_attr = MakePolicySink("attr:/nonexistent/{device}/table", {"mmc0"});
  EXPECT_EQ(missing_attr.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing_attr.status().message().find("/nonexistent/mmc0/table does not exist"),
            std::string::npos)
      << missing_attr.status();
  EXPECT_TRUE(MakePolicySink("file:x.bin", {"mmc0"}).ok()) << "the working directory";
}

// A destination that goes away after the start fails its write.
TEST(PolicySink, AWriteToADirectoryRemovedSinceTheStartFails) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("gone_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto sink = MakePolicySink("file:" + (dir / "x.bin").string(), {"mmc0"});
  ASSERT_TRUE(sink.ok()) << sink.status();
  fs::remove_all(dir);
  auto blob = EncodePolicyBlob(testing::SampleTable(), "mmc0");
  EXPECT_FALSE((*sink)->Apply("mmc0", *blob).ok());
}

}  // namespace
}  // namespace spintune

#include <sys/mman.h>

#include "spintune/shm.h"

namespace spintune {
namespace {

TEST(PolicySink, AttrSinkWritesTheBlobInOneWrite) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("attr_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string attr = (dir / "policy").string();
  { std::ofstream(attr) << std::string(5000, 'x'); }  // older, longer content
  auto sink = MakePolicySink("attr:" + attr, {"mmc0"});
  ASSERT_TRUE(sink.ok());
  auto blob = EncodePolicyBlob(testing::SampleTable(), "mmc0");
  ASSERT_TRUE((*sink)->Apply("mmc0", *blob).ok());
  std::ifstream in(attr, std::ios::binary);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), *blob);
  fs::remove_all(dir);
}

TEST(PolicySink, ShmSinkPublishesBehindTheSeqlock) {
  const std::string name = "spintune-test-" + std::to_string(getpid());
  auto sink = MakePolicySink("shm:" + name, {"mmc0"});
  ASSERT_TRUE(sink.ok()) << sink.status();
  auto blob = EncodePolicyBlob(testing::SampleTable(), "mmc0");
  ASSERT_TRUE((*sink)->Apply("mmc0", *blob).ok());
  // A reader maps the same object, as a user-space driver does.
  const int fd = shm_open(("/" + name).c_str(), O_RDONLY, 0);
  ASSERT_GE(fd, 0);
  struct stat st;
  ASSERT_EQ(fstat(fd, &st), 0);
  void* addr = mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(addr, MAP_FAILED);
  std::string copy(blob->size(), '\0');
  uint32_t len = 0, seq = 0;
  ASSERT_EQ(spintune_shm_snapshot(static_cast<const spintune_shm*>(addr), copy.data(),
                                  static_cast<uint32_t>(copy.size()), &len, &seq, 10),
            0);
  EXPECT_EQ(copy.substr(0, len), *blob);
  EXPECT_EQ(static_cast<const spintune_shm*>(addr)->table_version, 7u);
  munmap(addr, st.st_size);
  shm_unlink(("/" + name).c_str());
  EXPECT_FALSE(MakePolicySink("shm:a/b", {"mmc0"}).ok());
}

}  // namespace
}  // namespace spintune
