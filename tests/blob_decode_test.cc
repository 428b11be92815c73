// `spintune blob --decode FILE`: the exact command, its exit code and its
// message, on a good blob and on blobs a driver refuses.
#include <algorithm>
#include <fstream>
#include <string>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

class BlobDecode : public ::testing::Test {
 protected:
  // A blob of one device with three keys, written by `spintune blob`.
  void SetUp() override {
    std::ofstream(dir_.File("s.csv")) << "device,opcode,bytes,wait_ns\n"
                                         "mmc0,18,4096,200000\nmmc0,18,4096,210000\n"
                                         "mmc0,13,0,4000\nmmc0,13,0,4500\n"
                                         "mmc0,25,4096,300000\nmmc0,25,4096,350000\n";
    std::ofstream(dir_.File("p.json"))
        << R"({"irq_cpu_ns": 105000, "irq_wake_ns": 120000, "poll_read_ns": 300,
               "timer_cpu_ns": 90000, "timer_wake_ns": 130000})";
    auto tune = Cli({"tune", "--samples", dir_.File("s.csv"), "--platform", dir_.File("p.json"),
                     "--min-samples", "1"});
    ASSERT_EQ(tune.exit_code, 0) << tune.err;
    std::ofstream(dir_.File("policy.json")) << tune.out;
    auto blob = Cli({"blob", "--json", dir_.File("policy.json"), "-o", dir_.File("mmc0.spt")});
    ASSERT_EQ(blob.exit_code, 0) << blob.err;
    auto bytes = ReadFileToString(dir_.File("mmc0.spt"));
    ASSERT_TRUE(bytes.ok());
    blob_ = *bytes;
  }

  // Paths are absolute: the binary runs in the test's working directory.
  testing::RunResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), SPINTUNE_CLI_BIN);
    return testing::Run(args, dir_.path().string());
  }

  testing::RunResult Decode(const std::string& bytes) {
    std::ofstream(dir_.File("x.spt"), std::ios::binary) << bytes;
    return Cli({"blob", "--decode", dir_.File("x.spt")});
  }

  testing::TempDir dir_;
  std::string blob_;
};

TEST_F(BlobDecode, PrintsTheHeaderAndEveryEntry) {
  auto r = Cli({"blob", "--decode", dir_.File("mmc0.spt")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("mmc0.spt: valid policy blob, format 2, " + std::to_string(blob_.size()) +
                       " bytes, CRC-32 0x"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("device mmc0, table version 0, 4 entries, 0 context nodes"),
            std::string::npos)
      << r.out;
  // One row per entry under the column names, the fallback last.
  const size_t header = r.out.find("#  CPU");
  ASSERT_NE(header, std::string::npos) << r.out;
  const std::string rows = r.out.substr(r.out.find('\n', header) + 1);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 4) << r.out;
  EXPECT_NE(rows.find("0  0    13"), std::string::npos) << r.out;
  EXPECT_NE(rows.find("3  *    *       *"), std::string::npos) << r.out;
  EXPECT_NE(rows.find("fallback\n"), std::string::npos) << r.out;
}

TEST_F(BlobDecode, RefusesABadBlobWithTheDriversReason) {
  std::string corrupt = blob_;
  corrupt[corrupt.size() - 3] ^= 0x40;  // an entry's byte: the CRC no longer matches
  struct Case {
    std::string bytes, reason;
  };
  for (const Case& c : {Case{corrupt, "EBADMSG (CRC mismatch): CRC-32 mismatch"},
                        Case{"SPTX" + blob_.substr(4), "bad magic"},
                        Case{blob_.substr(0, blob_.size() - 1), "shorter than its header declares"},
                        Case{"hello", "shorter than a header"}}) {
    auto r = Decode(c.bytes);
    EXPECT_EQ(r.exit_code, 2) << c.reason;
    EXPECT_EQ(r.out, "") << c.reason;
    EXPECT_NE(r.err.find("x.spt: policy blob rejected: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.reason), std::string::npos) << r.err;
  }
  auto missing = Cli({"blob", "--decode", dir_.File("nope.spt")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.spt"), std::string::npos) << missing.err;
  auto both = Cli({"blob", "--decode", dir_.File("mmc0.spt"), "-o", dir_.File("y.spt")});
  EXPECT_EQ(both.exit_code, 2) << both.err;
}

}  // namespace
}  // namespace spintune
