// The binaries' command lines: --help, wrong flags, and bad input files give
// one clear error line and exit code 2.
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "nlohmann/json.hpp"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/store.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {



void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

class Cli : public ::testing::Test {
 protected:
  testing::RunResult Tune(const std::string& csv, const std::string& platform,
                          std::vector<std::string> extra = {}) {
    Write(dir_.File("s.csv"), csv);
    Write(dir_.File("p.json"), platform);
    std::vector<std::string> args = {SPINTUNE_CLI_BIN, "tune", "--samples", dir_.File("s.csv"),
                                     "--platform", dir_.File("p.json")};
    args.insert(args.end(), extra.begin(), extra.end());
    return testing::Run(args, dir_.path().string());
  }
  testing::TempDir dir_;
  const std::string platform_ =
      R"({"irq_cpu_ns": 20000, "irq_wake_ns": 30000, "poll_read_ns": 100,
          "timer_cpu_ns": 2000, "timer_wake_ns": 50000})";
};

TEST_F(Cli, EveryBinaryHasHelpAndRejectsWrongFlags) {
  std::vector<const char*> bins = {SPINTUNE_CLI_BIN, SPINTUNE_AGENT_BIN, SPINTUNE_TUNER_BIN,
                                   SPINTUNE_IOLOAD_BIN};
#ifdef SPINTUNE_LOADGEN_BIN
  bins.push_back(SPINTUNE_LOADGEN_BIN);
#endif
  for (const char* bin : bins) {
    auto help = testing::Run({bin, "--help"}, dir_.path().string());
    EXPECT_EQ(help.exit_code, 0) << bin;
    EXPECT_NE(help.out.find("Examples:"), std::string::npos) << bin;
    auto wrong = testing::Run({bin, "--no-such-flag"}, dir_.path().string());
    EXPECT_EQ(wrong.exit_code, 2) << bin;
    auto version = testing::Run({bin, "--version"}, dir_.path().string());
    EXPECT_EQ(version.exit_code, 0) << bin;
  }
}

TEST_F(Cli, TuneFitsAGoodFile) {
  std::string csv = "device,opcode,bytes,wait_ns,extra\n";
  for (int i = 0; i < 100; ++i) csv += "mmc0,23,0,2000,x\n";
  auto r = Tune(csv, platform_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"strategy\": \"spin_then_irq\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"expected_cost_ns\""), std::string::npos);
  auto table = Tune(csv, platform_, {"--format", "table"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  // Every sample is caught, so the threshold is raised to B = 20 + 30 us.
  EXPECT_NE(table.out.find("spin_then_irq T=50.0us"), std::string::npos) << table.out;
}

// Reads of 4 KiB (CMD18) issued within 300 us of a write's (CMD25)
// completion take 1 ms, the others 20 us; one command at a time, a write
// every third (so the previous completion tells the state as well).
std::string ReadAfterWriteCsv(bool with_issue) {
  std::string csv = with_issue ? "device,opcode,bytes,wait_ns,issue_ns\n"
                               : "device,opcode,bytes,wait_ns\n";
  uint64_t now = 0, last_write_done = 0;
  for (int i = 0; i < 4000; ++i) {
    const bool write = i % 3 == 0;
    const uint64_t x = write ? 100'000 : (i > 0 && now - last_write_done < 300'000 ? 1'000'000
                                                                                  : 20'000);
    csv += absl::StrCat("mmc0,", write ? 25 : 18, ",4096,", x,
                        with_issue ? absl::StrCat(",", now) : "", "\n");
    if (write) last_write_done = now + x;
    now += x + 10'000 * (1 + i % 5);
  }
  return csv;
}

TEST_F(Cli, TuneSplitsKeysByContextWhenTheSamplesHaveIssueTimes) {
  auto r = Tune(ReadAfterWriteCsv(true), platform_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  int leaves = 0;
  for (const auto& e : j["entries"]) {
    ASSERT_TRUE(e["context"].is_array());
    if (!e["context"].empty()) {
      ++leaves;
      EXPECT_EQ(e["opcode"], 18);
    }
  }
  EXPECT_EQ(leaves, 2) << r.out;
  // The table output names the leaves; the JSON makes a blob a driver loads.
  auto table = Tune(ReadAfterWriteCsv(true), platform_, {"--format", "table"});
  EXPECT_NE(table.out.find("CONTEXT"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("_ns<"), std::string::npos) << table.out;
  Write(dir_.File("ctx.json"), r.out);
  auto blob = testing::Run({SPINTUNE_CLI_BIN, "blob", "--json", dir_.File("ctx.json"), "-o",
                            dir_.File("ctx.bin")},
                           dir_.path().string());
  EXPECT_EQ(blob.exit_code, 0) << blob.err;
  // --context off, or samples without issue times (a note says so): one
  // entry per key.
  auto off = Tune(ReadAfterWriteCsv(true), platform_, {"--context", "off"});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(off.out.find("\"feature\""), std::string::npos);
  auto plain = Tune(ReadAfterWriteCsv(false), platform_);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("\"feature\""), std::string::npos);
  EXPECT_NE(plain.err.find("no issue_ns column"), std::string::npos) << plain.err;
  EXPECT_EQ(Tune(ReadAfterWriteCsv(true), platform_, {"--context", "maybe"}).exit_code, 2);
}

TEST_F(Cli, BadInputNamesFileAndLineAndExitsTwo) {
  const std::string header = "device,opcode,bytes,wait_ns\n";
  struct Case {
    std::string csv;
    std::string platform;
    std::vector<std::string> extra;
    std::string expected;
  } cases[] = {
      {"device,opcode,wait_ns\nmmc0,1,5\n", platform_, {}, "missing column(s) bytes"},
      {header + "mmc0,1,0,100\nmmc0,1,0,-5\n", platform_, {}, "s.csv:3: column wait_ns: negative"},
      {header + "mmc0,1,0,nan\n", platform_, {}, "s.csv:2: column wait_ns"},
      {header + "mmc0,x,0,100\n", platform_, {}, "s.csv:2: column opcode"},
      {header + "mmc0,1,0\n", platform_, {}, "s.csv:2: expected 4 fields"},
      {"", platform_, {}, "empty file"},
      {header, platform_, {}, "no samples"},
      {header + "mmc0,1,0,100\n", platform_, {"--objective", "fastest"}, "unknown objective"},
      {header + "mmc0,1,0,100\n", R"({"irq_cpu_ns": 1})", {}, "p.json"},
      {header + "mmc0,1,0,100\n", R"({"irq_cpu_ns": -1, "irq_wake_ns": 1, "poll_read_ns": 1,
          "timer_cpu_ns": 1, "timer_wake_ns": 1})", {}, "irq_cpu_ns"},
      {header + "mmc0,1,0,100\n", "{not json", {}, "not valid JSON"},
  };
  for (const auto& c : cases) {
    auto r = Tune(c.csv, c.platform, c.extra);
    EXPECT_EQ(r.exit_code, 2) << c.expected << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << "expected '" << c.expected
                                                         << "' in: " << r.err;
    // One line.
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  auto missing = testing::Run({SPINTUNE_CLI_BIN, "tune", "--samples", "/nonexistent.csv", "--platform",
                      dir_.File("p.json")},
                     dir_.path().string());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/nonexistent.csv"), std::string::npos);
}

TEST_F(Cli, StoredTargetCommandsOnAnEmptyDatabase) {
  const std::string db = dir_.File("empty.db");
  ASSERT_TRUE(Store::Open(db).ok());  // what a tuner leaves before any agent
  auto targets = testing::Run({SPINTUNE_CLI_BIN, "--db", db, "targets", "--format", "json"},
                     dir_.path().string());
  ASSERT_EQ(targets.exit_code, 0) << targets.err;
  EXPECT_NE(targets.out.find("\"targets\": []"), std::string::npos) << targets.out;
  auto policy = testing::Run({SPINTUNE_CLI_BIN, "--db", db, "policy", "nobody"}, dir_.path().string());
  EXPECT_EQ(policy.exit_code, 2);
  EXPECT_NE(policy.err.find("no target 'nobody'"), std::string::npos) << policy.err;
}

// Issue #15 item 1 / #17 item 7: `spintune --db typo.db targets` created an
// empty database, and a file that was not a spintune database was converted
// into one. Every --db command now refuses both (exit 2, one line) and
// leaves the file system as it was.
TEST_F(Cli, DbCommandsRefuseAMissingOrForeignDatabaseAndWriteNothing) {
  const std::vector<std::vector<std::string>> commands = {
      {"targets"},
      {"policy", "board-1"},
      {"header", "board-1"},
      {"report", "--target", "board-1", "-o", dir_.File("r.html")},
      {"profiles", "list"},
      {"profiles", "save", "p1", "--target", "board-1"},
      {"tokens", "list"},
      {"tokens", "revoke", "t1"}};
  Write(dir_.File("notes.db"), "not a database at all\n");
  {  // an SQLite file of another program
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir_.File("other.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE notes (text TEXT)", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  std::filesystem::copy_file(dir_.File("other.db"), dir_.File("other.copy"));
  std::filesystem::copy_file(dir_.File("notes.db"), dir_.File("notes.copy"));
  for (const auto& command : commands) {
    SCOPED_TRACE(command[0] + " " + (command.size() > 1 ? command[1] : ""));
    std::vector<std::string> args = {SPINTUNE_CLI_BIN, "--db", dir_.File("typo.db")};
    args.insert(args.end(), command.begin(), command.end());
    auto missing = testing::Run(args, dir_.path().string());
    EXPECT_EQ(missing.exit_code, 2) << missing.err;
    EXPECT_NE(missing.err.find("no database " + dir_.File("typo.db")), std::string::npos)
        << missing.err;
    EXPECT_FALSE(std::filesystem::exists(dir_.File("typo.db")));
    args[2] = dir_.File("notes.db");
    auto foreign = testing::Run(args, dir_.path().string());
    EXPECT_EQ(foreign.exit_code, 2) << foreign.err;
    EXPECT_NE(foreign.err.find("is not a spintune database"), std::string::npos) << foreign.err;
    EXPECT_EQ(testing::Slurp(dir_.File("notes.db")), testing::Slurp(dir_.File("notes.copy")));
    EXPECT_FALSE(std::filesystem::exists(dir_.File("notes.db-wal")));
    args[2] = dir_.File("other.db");
    auto other = testing::Run(args, dir_.path().string());
    EXPECT_EQ(other.exit_code, 2) << other.err;
    EXPECT_NE(other.err.find("is not a spintune database"), std::string::npos) << other.err;
    EXPECT_EQ(testing::Slurp(dir_.File("other.db")), testing::Slurp(dir_.File("other.copy")));
  }
  // Tokens are made before the tuner first runs: `tokens add` may start a
  // database, but never converts another program's file.
  auto other = testing::Run({SPINTUNE_CLI_BIN, "--db", dir_.File("notes.db"), "tokens", "add",
                             "t1", "--admin"},
                            dir_.path().string());
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_EQ(testing::Slurp(dir_.File("notes.db")), testing::Slurp(dir_.File("notes.copy")));
  auto fresh = testing::Run({SPINTUNE_CLI_BIN, "--db", dir_.File("new.db"), "tokens", "add", "t1",
                             "--admin"},
                            dir_.path().string());
  EXPECT_EQ(fresh.exit_code, 0) << fresh.err;
}

// Issue #17 item 7: read-only commands needed write access to the database.
// They now work on read-only media (root: a tmpfs remounted read-only).
TEST_F(Cli, ReadCommandsWorkOnADatabaseOnReadOnlyMedia) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  const std::string mnt = dir_.File("ro");
  std::filesystem::create_directories(mnt);
  ASSERT_EQ(mount("spintune-test", mnt.c_str(), "tmpfs", 0, "size=16m"), 0);
  const std::string db = mnt + "/tuner.db";
  {
    auto store = Store::Open(db);
    ASSERT_TRUE(store.ok());
    TargetRecord r;
    r.agent_id = "board-1";
    r.board = "ro-board";
    CpuClassRecord c;
    c.name = "default";
    c.cpu_khz = 1'000'000;
    c.declared = {20000, 30000, 100, 2000, 50000};
    r.cpu_classes.push_back(c);
    r.devices.push_back({"mmc0", "litex-mmc", "", {}});
    ASSERT_TRUE((*store)->UpsertTarget(r).ok());
    ASSERT_TRUE((*store)->AddToken("ops", "", true).ok());
  }
  ASSERT_EQ(mount(nullptr, mnt.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0);
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"targets"}, {"profiles", "list"}, {"tokens", "list"}}) {
    std::vector<std::string> args = {SPINTUNE_CLI_BIN, "--db", db};
    args.insert(args.end(), command.begin(), command.end());
    auto r = testing::Run(args, dir_.path().string());
    EXPECT_EQ(r.exit_code, 0) << command[0] << ": " << r.err;
  }
  auto targets = testing::Run({SPINTUNE_CLI_BIN, "--db", db, "targets"}, dir_.path().string());
  EXPECT_NE(targets.out.find("board-1"), std::string::npos) << targets.out;
  auto write = testing::Run({SPINTUNE_CLI_BIN, "--db", db, "tokens", "add", "x", "--admin"},
                            dir_.path().string());
  EXPECT_NE(write.exit_code, 0);
  umount2(mnt.c_str(), MNT_DETACH);
}

// spintune.ko knows a CPU class only by its index in the blob and writes
// "classN" (or "default" for 0) in its outcome reports: `spintune verify`
// finds the table's class of that index, and a name the table has is kept.
TEST_F(Cli, VerifyReadsAKernelModulesClassIndexNames) {
  const std::string db = dir_.File("t.db");
  {
    auto store = Store::Open(db);
    ASSERT_TRUE(store.ok());
    TargetRecord r;
    r.agent_id = "phone-1";
    r.board = "big-little";
    for (const char* name : {"big", "little"}) {
      CpuClassRecord c;
      c.name = name;
      c.cpu_khz = 1'000'000;
      c.declared = {20000, 30000, 100, 2000, 50000};
      r.cpu_classes.push_back(c);
    }
    r.devices.push_back({"mmc0", "sdhci", "", {}});
    auto id = (*store)->UpsertTarget(r);
    ASSERT_TRUE(id.ok()) << id.status();
    PolicyTable t;
    t.board = "big-little";
    t.cpu_classes = {{"big", 1'000'000, {}}, {"little", 1'000'000, {}}};
    t.devices = {{"mmc0", "sdhci", "", {}}};
    PolicyEntry little;
    little.key = {"little", "mmc0", 18, 13};
    little.wait = WaitParams::SpinThenIrq(40000);
    little.samples = 5000;
    little.expected_cost_ns = 90000;
    t.entries = {little};
    ASSERT_TRUE((*store)->AppendPolicyVersion(*id, &t, /*based_on=*/0).ok());
  }
  auto verify = [&](const std::string& cpu_class) {
    Write(dir_.File("r.json"),
          absl::StrCat(R"({"format": "spintune-outcomes", "format_version": 1, "device": "mmc0",
              "mode": "table", "policy_version": 1, "keys": [{"cpu_class": ")",
                       cpu_class, R"(", "opcode": 18, "bytes": 4096, "size_class": 13,
              "requests": 100, "cpu_ns_sum": 4e6, "latency_ns_sum": 9e6, "cpu_ns_sq_sum": 1.7e11,
              "latency_ns_sq_sum": 8.2e11, "cpu_latency_ns_sum": 3.7e11}]})"));
    auto r = testing::Run({SPINTUNE_CLI_BIN, "--db", db, "verify", "phone-1", "--report",
                           "table=" + dir_.File("r.json"), "--format", "json"},
                          dir_.path().string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto doc = nlohmann::json::parse(r.out, nullptr, false);
    return doc.is_discarded() ? size_t{0} : doc["keys"].size();
  };
  EXPECT_EQ(verify("class1"), 1u) << "the module's name for the table's second class";
  EXPECT_EQ(verify("little"), 1u);
  EXPECT_EQ(verify("class0"), 0u) << "the table's first class has no entry for the key";
  EXPECT_EQ(verify("class2"), 0u) << "no third class";
}

TEST_F(Cli, TunerShutsDownOnSigtermWithAnAgentConnected) {
  const pid_t tuner = testing::Spawn(
      {SPINTUNE_TUNER_BIN, "--listen", "127.0.0.1:0", "--db", dir_.File("t.db"),
       "--shutdown-deadline", "1"},
      dir_.File("tuner.out"), dir_.File("tuner.err"));
  const std::string address = testing::WaitForLine(dir_.File("tuner.out"), "listening on ");
  ASSERT_FALSE(address.empty()) << testing::Slurp(dir_.File("tuner.err"));
  const pid_t agent = testing::Spawn(
      {SPINTUNE_AGENT_BIN, "--tuner", address, "--source", "sim:imx28-mxs-mmc", "--rate", "2000",
       "--give-up-after", "1", "--state-dir", dir_.File("state")},
      dir_.File("agent.out"), dir_.File("agent.err"));
  usleep(700'000);
  const absl::Time start = absl::Now();
  ASSERT_EQ(kill(tuner, SIGTERM), 0);
  EXPECT_EQ(testing::WaitExit(tuner), 0) << testing::Slurp(dir_.File("tuner.err"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(4)) << "shutdown deadline not honoured";
  const std::string log = testing::Slurp(dir_.File("tuner.err"));
  EXPECT_NE(log.find("signal 15: shutting down"), std::string::npos) << log;
  EXPECT_NE(log.find("stopped sessions=1"), std::string::npos) << log;
  // Without a tuner the agent gives up after --give-up-after and says so.
  EXPECT_EQ(testing::WaitExit(agent), 1);
  EXPECT_NE(testing::Slurp(dir_.File("agent.err")).find("no session with"), std::string::npos);
}

}  // namespace
}  // namespace spintune

namespace spintune {
namespace {

const std::string kFixture =
    std::string(SPINTUNE_SOURCE_DIR) + "/tests/fixtures/trace/virtio-6.18-trace.txt";

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

TEST_F(Cli, ExtractWritesBothCsvsAndASummary) {
  auto r = testing::Run({SPINTUNE_CLI_BIN, "extract", "--trace", kFixture, "--completions",
                         dir_.File("c.csv"), "--dispatch", dir_.File("d.csv"), "--summary",
                         "--block-dev", "254:0=vda"},
                        dir_.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto c = Lines(dir_.File("c.csv"));
  ASSERT_EQ(c.size(), 84u);
  EXPECT_EQ(c[0], "device,opcode,bytes,wait_ns,cpu_class,path,error,timeout,issue_ns,cpu");
  EXPECT_EQ(c[1], "vda,0,4096,290000,default,irq,0,0,4690365178000,0");
  const auto d = Lines(dir_.File("d.csv"));
  ASSERT_EQ(d.size(), 84u);
  EXPECT_EQ(d[0], "cpu,irq,device,handler_ns,wake_ns");
  EXPECT_NE(r.out.find("virtio1-req.0 (irq 36) -> vda"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("83 completions, 83 dispatch samples"), std::string::npos) << r.err;
}

TEST_F(Cli, ExtractRefusesUnusableInputWithAReason) {
  Write(dir_.File("junk.txt"), "not a trace\n\x01\x02\n");
  auto junk = testing::Run({SPINTUNE_CLI_BIN, "extract", "--trace", dir_.File("junk.txt"),
                            "--summary"},
                           dir_.path().string());
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_NE(junk.err.find("no usable events"), std::string::npos) << junk.err;
  auto missing = testing::Run({SPINTUNE_CLI_BIN, "extract", "--trace", dir_.File("nope.txt"),
                               "--summary"},
                              dir_.path().string());
  EXPECT_EQ(missing.exit_code, 2);
  auto bad_map = testing::Run({SPINTUNE_CLI_BIN, "extract", "--trace", kFixture, "--summary",
                               "--irq", "vda"},
                              dir_.path().string());
  EXPECT_EQ(bad_map.exit_code, 2);
  EXPECT_NE(bad_map.err.find("DEVICE=IRQNAME"), std::string::npos) << bad_map.err;
}

TEST_F(Cli, AgentExplainsMissingPlatformForReplay) {
  auto r = testing::Run({SPINTUNE_AGENT_BIN, "--source", "replay:" + kFixture, "--state-dir", ""},
                        dir_.path().string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--platform"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace spintune

namespace spintune {
namespace {

TEST_F(Cli, TokensAddListRevoke) {
  const std::string db = dir_.File("t.db");
  auto add = testing::Run({SPINTUNE_CLI_BIN, "--db", db, "tokens", "add", "b1", "--target", "board-1"},
                          dir_.path().string());
  ASSERT_EQ(add.exit_code, 0) << add.err;
  EXPECT_EQ(add.out.rfind("st_", 0), 0u) << add.out;
  EXPECT_EQ(add.out.size(), 3 + 64 + 1);
  auto to_file = testing::Run({SPINTUNE_CLI_BIN, "--db", db, "tokens", "add", "ops", "--admin",
                               "-o", dir_.File("ops.token")},
                              dir_.path().string());
  ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
  EXPECT_EQ(testing::Slurp(dir_.File("ops.token")).rfind("st_", 0), 0u);
  EXPECT_EQ(std::filesystem::status(dir_.File("ops.token")).permissions() &
                std::filesystem::perms::others_read,
            std::filesystem::perms::none);
  EXPECT_EQ(testing::Run({SPINTUNE_CLI_BIN, "--db", db, "tokens", "revoke", "b1"},
                         dir_.path().string())
                .exit_code,
            0);
  auto list = testing::Run({SPINTUNE_CLI_BIN, "--db", db, "tokens", "list", "--format", "json"},
                           dir_.path().string());
  ASSERT_EQ(list.exit_code, 0) << list.err;
  auto j = nlohmann::json::parse(list.out);
  ASSERT_EQ(j["tokens"].size(), 2u);
  EXPECT_EQ(j["tokens"][0]["name"], "b1");
  EXPECT_NE(j["tokens"][0]["revoked_at"], "");
  EXPECT_EQ(j["tokens"][1]["admin"], true);
  EXPECT_EQ(list.out.find("st_"), std::string::npos) << "tokens are never shown again";
  // Bad input: exit code 2 and one line.
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"tokens", "add", "x"},
        std::vector<std::string>{"tokens", "add", "ops", "--admin"},
        std::vector<std::string>{"tokens", "revoke", "nobody"},
        std::vector<std::string>{"tokens", "add"}, std::vector<std::string>{"tokens", "frob"}}) {
    std::vector<std::string> args = {SPINTUNE_CLI_BIN, "--db", db};
    args.insert(args.end(), bad.begin(), bad.end());
    auto r = testing::Run(args, dir_.path().string());
    EXPECT_EQ(r.exit_code, 2) << bad[1] << " " << r.err;
  }
}

}  // namespace
}  // namespace spintune

namespace spintune {
namespace {

TEST_F(Cli, DataOutputsHaveAJsonFormat) {
  auto summary = testing::Run({SPINTUNE_CLI_BIN, "extract", "--trace", kFixture, "--summary",
                               "--block-dev", "254:0=vda", "--format", "json"},
                              dir_.path().string());
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  const auto j = nlohmann::json::parse(summary.out);
  ASSERT_FALSE(j["keys"].empty());
  EXPECT_EQ(j["keys"][0]["device"], "vda");
  uint64_t total = 0;
  for (const auto& k : j["keys"]) total += k["count"].get<uint64_t>();
  EXPECT_EQ(total, 83u);
  EXPECT_EQ(j["irq_lines"][0]["count"], 83);

  auto boards = testing::Run({SPINTUNE_AGENT_BIN, "--list-boards", "--format", "json"},
                             dir_.path().string());
  ASSERT_EQ(boards.exit_code, 0) << boards.err;
  const auto b = nlohmann::json::parse(boards.out)["boards"];
  EXPECT_GE(b.size(), 8u);
  EXPECT_EQ(testing::Run({SPINTUNE_AGENT_BIN, "--list-boards", "--format", "yaml"},
                         dir_.path().string())
                .exit_code,
            2);
  ASSERT_TRUE(Store::Open(dir_.File("empty.db")).ok());
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"targets"}, {"profiles", "list"}, {"tokens", "list"}}) {
    std::vector<std::string> argv = {SPINTUNE_CLI_BIN, "--db", dir_.File("empty.db")};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--format", "json"});
    auto r = testing::Run(argv, dir_.path().string());
    ASSERT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_TRUE(nlohmann::json::parse(r.out).is_object()) << args[0];
  }
}

TEST_F(Cli, TunerAndAgentReadAConfigFileThatFlagsOverride) {
  Write(dir_.File("tuner.toml"), "# the tuner\nlisten = \"127.0.0.1:0\"\ndb = \"" +
                                     dir_.File("from-file.db") +
                                     "\"\nobjective = \"latency\"\nrefit-samples = 1000\n");
  const pid_t tuner = testing::Spawn(
      {SPINTUNE_TUNER_BIN, "--config", dir_.File("tuner.toml"), "--db", dir_.File("from-flag.db")},
      dir_.File("tuner.out"), dir_.File("tuner.err"));
  const std::string address = testing::WaitForLine(dir_.File("tuner.out"), "listening on ");
  ASSERT_FALSE(address.empty()) << testing::Slurp(dir_.File("tuner.err"));
  Write(dir_.File("agent.toml"), "tuner = \"" + address +
                                     "\"\nsource = \"sim:imx28-mxs-mmc\"\nmax-samples = 3000\n"
                                     "agent-id = \"from-file\"\nstate-dir = \"" +
                                     dir_.File("state") + "\"\n");
  auto agent = testing::Run({SPINTUNE_AGENT_BIN, "--config", dir_.File("agent.toml"),
                             "--agent-id", "from-flag"},
                            dir_.path().string());
  EXPECT_EQ(agent.exit_code, 0) << agent.err;
  kill(tuner, SIGTERM);
  EXPECT_EQ(testing::WaitExit(tuner), 0);
  const std::string log = testing::Slurp(dir_.File("tuner.err"));
  EXPECT_NE(log.find("objective=latency"), std::string::npos) << "from the file: " << log;
  EXPECT_TRUE(std::filesystem::exists(dir_.File("from-flag.db"))) << "the flag wins";
  EXPECT_FALSE(std::filesystem::exists(dir_.File("from-file.db")));
  auto targets = testing::Run(
      {SPINTUNE_CLI_BIN, "--db", dir_.File("from-flag.db"), "targets", "--format", "json"},
      dir_.path().string());
  ASSERT_EQ(targets.exit_code, 0);
  const auto t = nlohmann::json::parse(targets.out)["targets"];
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0]["agent_id"], "from-flag");
  EXPECT_EQ(t[0]["total_samples"], 3000);

  // A misspelt key or a missing file is a usage error.
  Write(dir_.File("typo.toml"), "refit-sample = 10\n");
  auto typo = testing::Run({SPINTUNE_TUNER_BIN, "--config", dir_.File("typo.toml")},
                           dir_.path().string());
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("refit-sample"), std::string::npos) << typo.err;
  EXPECT_EQ(testing::Run({SPINTUNE_AGENT_BIN, "--config", dir_.File("none.toml")},
                         dir_.path().string())
                .exit_code,
            2);
}

}  // namespace
}  // namespace spintune

namespace spintune {
namespace {

TEST_F(Cli, EverySubcommandHasHelpWithExamples) {
  for (const char* sub : {"tune", "targets", "policy", "header", "blob", "profiles", "report",
                          "extract", "tokens"}) {
    auto help = testing::Run({SPINTUNE_CLI_BIN, sub, "--help"}, dir_.path().string());
    EXPECT_EQ(help.exit_code, 0) << sub;
    EXPECT_NE(help.out.find("Example"), std::string::npos) << sub << ": " << help.out;
    auto wrong = testing::Run({SPINTUNE_CLI_BIN, sub, "--no-such-flag"}, dir_.path().string());
    EXPECT_EQ(wrong.exit_code, 2) << sub;
  }
}

TEST_F(Cli, JsonLogsAreOneObjectPerLine) {
  const std::string db = dir_.File("quote\"d.db");  // a message with a quote in it
  const pid_t tuner = testing::Spawn({SPINTUNE_TUNER_BIN, "--listen", "127.0.0.1:0", "--db", db,
                                      "--log-format", "json"},
                                     dir_.File("tuner.out"), dir_.File("tuner.err"));
  ASSERT_NE(testing::WaitForLine(dir_.File("tuner.out"), "listening on "), "");
  kill(tuner, SIGTERM);
  ASSERT_EQ(testing::WaitExit(tuner), 0);
  std::ifstream in(dir_.File("tuner.err"));
  int lines = 0;
  bool saw_db = false;
  for (std::string line; std::getline(in, line); ++lines) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    EXPECT_EQ(j["component"], "tuner");
    EXPECT_TRUE(j["level"] == "info" || j["level"] == "warning") << line;
    EXPECT_EQ(j["time"].get<std::string>().back(), 'Z');
    saw_db = saw_db || j["msg"].get<std::string>().find("db=" + db) != std::string::npos;
  }
  EXPECT_GE(lines, 3);
  EXPECT_TRUE(saw_db);
  auto bad = testing::Run({SPINTUNE_AGENT_BIN, "--log-format", "xml", "--tuner", "127.0.0.1:1",
                           "--source", "sim:imx28-mxs-mmc", "--state-dir", dir_.File("st")},
                          dir_.path().string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown log format 'xml'"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace spintune
