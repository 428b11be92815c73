// Bad input to the binaries reads well: a directory where a file is
// expected, a typo in a --config file, a port another process listens on.
// Each runs the built binary and expects exit code 2 and one stderr line
// that names the path, the key and file, or the address.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

class InputErrors : public ::testing::Test {
 protected:
  testing::RunResult Run(std::vector<std::string> argv) {
    return testing::Run(argv, dir_.path().string());
  }
  // Exit code 2 and exactly one stderr line holding every one of `needles`.
  void ExpectOneLineError(const std::vector<std::string>& argv,
                          const std::vector<std::string>& needles) {
    const testing::RunResult r = Run(argv);
    const std::string cmd = absl::StrJoin(argv, " ");
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << cmd << "\n" << r.err;
    for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << cmd << "\n" << r.err;
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_.File(name)) << text;
    return dir_.File(name);
  }

  testing::TempDir dir_;
};

TEST_F(InputErrors, ADirectoryWhereAFileIsExpectedIsNamed) {
  const std::string d = dir_.File("adir");
  std::filesystem::create_directory(d);
  const std::string platform = Write("p.json", "{}");
  const std::string csv = Write("s.csv", "cpu_class,device,opcode,size_class,latency_ns\n");
  const std::string is_dir = d + " is a directory, expected a file";
  const std::vector<std::vector<std::string>> commands = {
      {SPINTUNE_CLI_BIN, "tune", "--samples", d, "--platform", platform},
      {SPINTUNE_CLI_BIN, "tune", "--samples", csv, "--platform", d},
      {SPINTUNE_AGENT_BIN, "--source", "csv:" + csv, "--platform", d},
      {SPINTUNE_AGENT_BIN, "--source", "replay:" + d, "--platform", platform},
      {SPINTUNE_AGENT_BIN, "--source", "sim:microwatt-100mhz", "--token-file", d},
      {SPINTUNE_AGENT_BIN, "--config", d},
      {SPINTUNE_TUNER_BIN, "--db", d, "--listen", "127.0.0.1:0"},
      {SPINTUNE_TUNER_BIN, "--config", d},
      {SPINTUNE_TUNER_BIN, "--tls-cert", d, "--tls-key", d, "--listen", "127.0.0.1:0"},
  };
  for (const auto& argv : commands) ExpectOneLineError(argv, {is_dir});
}

// Issue 15 item 1: one fit-flag parser; both binaries refuse the same
// latency weights with the same words, before they read or bind anything.
TEST_F(InputErrors, BadLatencyWeightsAreRefusedByTuneAndTheTuner) {
  const std::string platform = Write("p.json", "{}");
  const std::string csv = Write("s.csv", "device,opcode,bytes,wait_ns\n");
  for (const std::string w : {"-1", "nan", "inf", "1e9"}) {
    ExpectOneLineError({SPINTUNE_CLI_BIN, "tune", "--samples", csv, "--platform", platform,
                        "--latency-weight", w},
                       {"--latency-weight", "[0, 1e6]"});
    ExpectOneLineError({SPINTUNE_TUNER_BIN, "--db", dir_.File("t.db"), "--listen",
                        "127.0.0.1:0", "--latency-weight", w},
                       {"--latency-weight", "[0, 1e6]"});
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.File("t.db"))) << "refused before the database";
}

TEST_F(InputErrors, AConfigKeyTypoNamesTheKeyAndTheFile) {
  // Without the mapping CLI11 says "INI was not able to parse lisen".
  const std::string tuner = Write("tuner.toml", "listen = \"127.0.0.1:0\"\nlisen = \"x\"\n");
  ExpectOneLineError({SPINTUNE_TUNER_BIN, "--config", tuner},
                     {tuner + ": unknown key 'lisen'"});
  const std::string agent = Write("agent.toml", "tuner = \"127.0.0.1:1\"\nsorce = \"sim:x\"\n");
  ExpectOneLineError({SPINTUNE_AGENT_BIN, "--config", agent},
                     {agent + ": unknown key 'sorce'"});
  const std::string section = Write("section.toml", "[tuner]\nlisten = \"127.0.0.1:0\"\n");
  ExpectOneLineError({SPINTUNE_TUNER_BIN, "--config", section},
                     {section + ": unknown section [tuner]"});
  ExpectOneLineError({SPINTUNE_AGENT_BIN, "--config", dir_.File("missing.toml")},
                     {"--config " + dir_.File("missing.toml") + ": cannot read"});
}

// A loopback socket that listens on a kernel-chosen port until destroyed.
class TakenPort {
 public:
  TakenPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 1), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    address_ = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  }
  ~TakenPort() { close(fd_); }
  const std::string& address() const { return address_; }

 private:
  int fd_ = -1;
  std::string address_;
};

TEST_F(InputErrors, APortInUseIsOneLineWithoutGrpcDump) {
  TakenPort taken;
  const std::string db = dir_.File("tuner.db");
  for (const std::string flag : {"--listen", "--metrics-listen"}) {
    std::vector<std::string> argv = {SPINTUNE_TUNER_BIN, "--db", db, flag, taken.address()};
    if (flag != "--listen") argv.insert(argv.end(), {"--listen", "127.0.0.1:0"});
    const testing::RunResult r = Run(argv);
    ExpectOneLineError(argv, {flag + " " + taken.address() + ": address already in use"});
    EXPECT_EQ(r.err.find("chttp2"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << "nothing started";
  }
  EXPECT_FALSE(std::filesystem::exists(db)) << "refused before the database is created";
}

// spintune-agent --outcomes: an unreadable or malformed report, a source
// that never ends, a report of a device the source does not have. The tuner
// address is never dialled: the reports are checked first.
TEST_F(InputErrors, BadOutcomeReportsAreRefusedBeforeTheAgentConnects) {
  const std::string csv = Write("s.csv", "device,opcode,bytes,wait_ns,path,cpu_class\n"
                                         "uring0,0,4096,5000,spin,default\n");
  const std::string platform = Write(
      "p.json", R"({"board": "b", "irq_cpu_ns": 1, "irq_wake_ns": 1, "poll_read_ns": 1,
                   "timer_cpu_ns": 1, "timer_wake_ns": 1, "devices": [{"name": "uring0"}]})");
  auto report = [&](const std::string& name, const std::string& device) {
    return Write(name, R"({"format": "spintune-outcomes", "format_version": 1, "device": ")" +
                           device + R"(", "policy_version": 1, "keys": [{"opcode": 0,
                 "bytes": 4096, "size_class": 13, "requests": 1, "cpu_ns_sum": 1,
                 "latency_ns_sum": 1, "cpu_ns_sq_sum": 1, "latency_ns_sq_sum": 1,
                 "cpu_latency_ns_sum": 1}]})");
  };
  const std::vector<std::string> agent = {SPINTUNE_AGENT_BIN, "--tuner", "127.0.0.1:9",
                                          "--state-dir", "", "--platform", platform};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = agent;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  };
  const std::string bad = Write("bad.json", R"({"format": "spintune-outcomes"})");
  ExpectOneLineError(with({"--source", "csv:" + csv, "--outcomes", bad}),
                     {"spintune-agent: --outcomes: ", bad, "not an outcome report"});
  ExpectOneLineError(with({"--source", "csv:" + csv, "--outcomes", dir_.File("none.json")}),
                     {"spintune-agent: --outcomes: ", dir_.File("none.json")});
  ExpectOneLineError(
      with({"--source", "sim:litex-rocket-50mhz-slowcard", "--outcomes", report("r.json", "mmc0")}),
      {"spintune-agent: --outcomes: ", "a source that ends"});
  ExpectOneLineError(with({"--source", "csv:" + csv, "--outcomes", report("m.json", "mmc0")}),
                     {"spintune-agent: --outcomes: ", "device 'mmc0'", "no such device"});
}

}  // namespace
}  // namespace spintune
