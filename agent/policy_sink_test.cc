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

// What each sink tells the tuner its drivers read (Hello max_blob_format):
// an attr: driver says it in the file beside its attribute (spintune.ko's
// max_blob_format), the lowest of the devices counts, and a driver that says
// nothing (or nonsense) is taken to read format 2; file: and shm: readers
// cannot be asked (2 unless declared); none has only this agent's parser.
TEST(PolicySink, EachSinkSaysWhichBlobFormatItsDriversRead) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("formats_" + std::to_string(getpid()));
  for (const char* dev : {"mmc0", "mmc1"}) {
    fs::create_directories(dir / dev);
    std::ofstream(dir / dev / "table") << "";
  }
  const std::string attr = "attr:" + (dir / "{device}" / "table").string();
  auto max_format = [](const absl::StatusOr<std::unique_ptr<PolicySink>>& sink) {
    EXPECT_TRUE(sink.ok()) << sink.status();
    return sink.ok() ? (*sink)->MaxBlobFormat() : 0u;
  };
  EXPECT_EQ(max_format(MakePolicySink(attr, {"mmc0"})), 2u) << "a driver that does not say";
  std::ofstream(dir / "mmc0" / "max_blob_format") << "3\n";
  EXPECT_EQ(max_format(MakePolicySink(attr, {"mmc0"})), 3u);
  EXPECT_EQ(max_format(MakePolicySink(attr, {"mmc0", "mmc1"})), 2u) << "the lowest device";
  std::ofstream(dir / "mmc1" / "max_blob_format") << "banana";
  EXPECT_EQ(max_format(MakePolicySink(attr, {"mmc1"})), 2u);
  std::ofstream(dir / "mmc1" / "max_blob_format") << "9\n";
  EXPECT_EQ(max_format(MakePolicySink(attr, {"mmc0", "mmc1"})), 3u)
      << "no more than this agent writes";
  EXPECT_EQ(max_format(MakePolicySink(attr, {"mmc0"}, 2)), 2u) << "declared wins";
  EXPECT_EQ(max_format(MakePolicySink("file:" + (dir / "x.bin").string(), {"mmc0"})), 2u);
  EXPECT_EQ(max_format(MakePolicySink("file:" + (dir / "x.bin").string(), {"mmc0"}, 3)), 3u);
  const std::string shm = "shm:spintune-formats-" + std::to_string(getpid());
  EXPECT_EQ(max_format(MakePolicySink(shm, {"mmc0"})), 2u);
  EXPECT_EQ(max_format(MakePolicySink(shm, {"mmc0"}, 3)), 3u);
  EXPECT_EQ(max_format(MakePolicySink("none", {"mmc0"})), 3u);
  EXPECT_EQ(MakePolicySink("none", {"mmc0"}, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakePolicySink("none", {"mmc0"}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spintune
