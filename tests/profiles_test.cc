// `spintune profiles` end to end through the binary: every command on
// hand-built tables, hostile imports (clear error, nothing written), headers
// and blobs from a profile, and a rollback reaching a live agent through a
// running tuner, which then stops refitting the target until it is unpinned.
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/agent.h"
#include "agent/policy_sink.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "policy/policy_blob.h"
#include "storage/store.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

using nlohmann::json;

PolicyEntry Entry(const std::string& cpu, uint32_t opcode, WaitParams wait, double cost_ns) {
  PolicyEntry e;
  e.key = {cpu, "mmc0", opcode, 0};
  e.wait = wait;
  e.samples = 100;
  e.expected_cost_ns = cost_ns;
  return e;
}

PolicyEntry Fallback(WaitParams wait, double cost_ns) {
  PolicyEntry e = Entry(kAnyCpuClass, 0, wait, cost_ns);
  e.fallback = true;
  return e;
}

// A table for one CPU class "big" and device "mmc0" with the given entries,
// and evidence of 100 samples at 5 us for every non-fallback entry.
Profile HandBuilt(const std::string& name, std::vector<PolicyEntry> entries) {
  Profile p;
  p.info.name = name;
  p.info.target = "board-1";
  p.info.created_at = "2026-11-30T00:00:00Z";
  p.table.board = "hand-built";
  CpuClassInfo cpu;
  cpu.name = "big";
  cpu.cpu_khz = 1'000'000;
  cpu.costs = {20000, 30000, 100, 2000, 50000};
  p.table.cpu_classes = {cpu};
  DeviceInfo dev;
  dev.name = "mmc0";
  dev.driver = "sdhci";
  p.table.devices = {dev};
  for (const auto& e : entries) {
    if (e.fallback) continue;
    KeyEvidence k;
    k.key = e.key;
    k.histogram.Record(5000, 100);
    p.keys.push_back(k);
    p.info.samples += 100;
    ++p.info.keys;
  }
  p.table.entries = std::move(entries);
  SortEntries(&p.table.entries);
  return p;
}

class Profiles : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(db_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  testing::RunResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), {SPINTUNE_CLI_BIN, "--db", db_});
    return testing::Run(args, dir_.path().string());
  }
  void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

  testing::TempDir dir_;
  const std::string db_ = dir_.File("tuner.db");
  std::unique_ptr<Store> store_;
};

TEST_F(Profiles, DiffOfTwoHandBuiltTables) {
  ASSERT_TRUE(store_
                  ->SaveProfile(HandBuilt("old", {Entry("big", 17, WaitParams::SpinThenIrq(10000), 5000),
                                                  Entry("big", 24, WaitParams::Irq(), 20000),
                                                  Fallback(WaitParams::Irq(), 21000)}))
                  .ok());
  ASSERT_TRUE(store_
                  ->SaveProfile(HandBuilt("new", {Entry("big", 17, WaitParams::SpinThenIrq(20000), 4000),
                                                  Entry("big", 25, WaitParams::Spin(50000), 9000),
                                                  Fallback(WaitParams::Irq(), 21000)}))
                  .ok());
  auto table = Cli({"profiles", "diff", "old", "new"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  // A ON B: A's threshold on B's samples (all 5 us: spun through, 5 us of
  // CPU plus 5 us of latency).
  EXPECT_NE(table.out.find("mmc0 big op17 0  spin_then_irq T=10.0us  spin_then_irq T=20.0us  "
                           "5.0us   4.0us   -1.0us  10.0us  changed"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("mmc0 big op24 0  irq"), std::string::npos);
  EXPECT_NE(table.out.find("only_a"), std::string::npos);
  EXPECT_NE(table.out.find("only_b"), std::string::npos);
  EXPECT_NE(table.out.find("1 changed, 1 same, 1 only in old, 1 only in new"), std::string::npos)
      << table.out;

  auto j = Cli({"profiles", "diff", "old", "new", "--format", "json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const json d = json::parse(j.out);
  EXPECT_EQ(d["changed"], 1);
  EXPECT_EQ(d["same"], 1);
  EXPECT_EQ(d["only_a"], 1);
  EXPECT_EQ(d["only_b"], 1);
  ASSERT_EQ(d["keys"].size(), 4u);
  const json& first = d["keys"][0];
  EXPECT_EQ(first["opcode"], 17);
  EXPECT_EQ(first["change"], "changed");
  EXPECT_DOUBLE_EQ(first["cost_delta_ns"].get<double>(), -1000.0);
  EXPECT_NEAR(first["a_on_b_cost_ns"].get<double>(), 10000.0, 100.0);
  EXPECT_FALSE(d["keys"][3].contains("a_on_b_cost_ns")) << "fallbacks have no key evidence";
  EXPECT_EQ(first["b"]["wait"]["spin_ns"], 20000);
  EXPECT_EQ(d["keys"][1]["change"], "only_a");
  EXPECT_FALSE(d["keys"][1].contains("b"));
  EXPECT_EQ(d["keys"][2]["change"], "only_b");
  EXPECT_EQ(d["keys"][3]["fallback"], true);
  EXPECT_EQ(d["keys"][3]["change"], "same");

  EXPECT_EQ(Cli({"profiles", "diff", "old", "nope"}).exit_code, 2);
  EXPECT_EQ(Cli({"profiles", "diff", "old"}).exit_code, 2);
}

TEST_F(Profiles, ListShowExportDeleteImportRoundTrip) {
  Profile p = HandBuilt("rocket-v1", {Entry("big", 17, WaitParams::SpinThenIrq(10000), 5000),
                                      Fallback(WaitParams::Irq(), 21000)});
  p.info.note = "driver 1.0";
  ASSERT_TRUE(store_->SaveProfile(p).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(store_->SaveProfile(p)));

  auto list = Cli({"profiles", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("rocket-v1  board-1"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("driver 1.0"), std::string::npos);
  auto list_json = Cli({"profiles", "list", "--format", "json"});
  ASSERT_EQ(list_json.exit_code, 0);
  EXPECT_EQ(json::parse(list_json.out)["profiles"][0]["samples"], 100);

  auto show = Cli({"profiles", "show", "rocket-v1"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("note: driver 1.0"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("spin_then_irq T=10.0us"), std::string::npos) << show.out;
  auto show_json = Cli({"profiles", "show", "rocket-v1", "--format", "json"});
  ASSERT_EQ(show_json.exit_code, 0);
  EXPECT_EQ(json::parse(show_json.out)["table"]["entries"].size(), 2u);

  const std::string file = dir_.File("rocket-v1.json");
  ASSERT_EQ(Cli({"profiles", "export", "rocket-v1", "-o", file}).exit_code, 0);
  const std::string exported = testing::Slurp(file);
  auto reparsed = ParseProfileJson(exported);
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  EXPECT_EQ(reparsed->keys[0].histogram, p.keys[0].histogram);

  ASSERT_EQ(Cli({"profiles", "delete", "rocket-v1"}).exit_code, 0);
  EXPECT_EQ(Cli({"profiles", "delete", "rocket-v1"}).exit_code, 2);
  EXPECT_EQ(Cli({"profiles", "show", "rocket-v1"}).exit_code, 2);
  auto imported = Cli({"profiles", "import", file});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_EQ(Cli({"profiles", "import", file}).exit_code, 2) << "name taken";
  ASSERT_EQ(Cli({"profiles", "import", file, "--name", "rocket-v1-lab"}).exit_code, 0);
  auto back = store_->LoadProfile("rocket-v1");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(ProfileToJson(*back), ProfileToJson(p)) << "export/import is lossless";
}

TEST_F(Profiles, HostileImportsAreRefusedAndWriteNothing) {
  const json good = ProfileToJson(
      HandBuilt("ok", {Entry("big", 17, WaitParams::SpinThenIrq(10000), 5000),
                       Fallback(WaitParams::Irq(), 21000)}));
  struct Case {
    std::string what;
    std::string text;
    std::string expected;
  };
  std::vector<Case> cases = {{"not json", "{\"format\": ", "not valid JSON"},
                             {"an array", "[1, 2]", "must be a JSON object"}};
  auto with = [&](const std::string& what, auto edit, const std::string& expected) {
    json j = good;
    edit(j);
    cases.push_back({what, j.dump(), expected});
  };
  with("other format", [](json& j) { j["format"] = "spintune-policy"; }, "profile.format");
  with("newer version", [](json& j) { j["format_version"] = 2; },
       "this spintune reads version 1");
  with("path in name", [](json& j) { j["name"] = "../../etc/passwd"; }, "profile name");
  with("unknown field", [](json& j) { j["exec"] = "rm -rf /"; }, "profile.exec: unknown field");
  with("bucket not a lower bound",
       [](json& j) { j["evidence"]["keys"][0]["buckets"] = json::array({json::array({1001, 5})}); },
       "not a bucket's lower bound");
  with("decreasing buckets",
       [](json& j) {
         j["evidence"]["keys"][0]["buckets"] = json::array({json::array({200, 1}), json::array({100, 1})});
       },
       "increasing");
  with("zero count",
       [](json& j) { j["evidence"]["keys"][0]["buckets"] = json::array({json::array({100, 0})}); },
       "count must be");
  with("negative count",
       [](json& j) { j["evidence"]["keys"][0]["buckets"] = json::array({json::array({100, -3})}); },
       "non-negative integers");
  with("errors above samples", [](json& j) { j["evidence"]["keys"][0]["errors"] = 101; },
       "errors: must be <= 100");
  with("unknown device", [](json& j) { j["evidence"]["keys"][0]["device"] = "sda"; },
       "not a device of the table");
  with("spin beyond the driver's bound",
       [](json& j) { j["table"]["entries"][0]["spin_ns"] = 5'000'000'000ull; },
       "profile.table: entries[0]");
  with("strategy unknown", [](json& j) { j["table"]["entries"][0]["strategy"] = "yield"; },
       "strategy");
  with("no evidence", [](json& j) { j.erase("evidence"); }, "profile.evidence: missing");
  for (const auto& c : cases) {
    const std::string file = dir_.File("hostile.json");
    Write(file, c.text);
    auto r = Cli({"profiles", "import", file});
    EXPECT_EQ(r.exit_code, 2) << c.what;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.what << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  }
  auto missing = Cli({"profiles", "import", dir_.File("absent.json")});
  EXPECT_EQ(missing.exit_code, 2);
  auto all = store_->ListProfiles();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty()) << "nothing written";
  // The unedited file imports.
  Write(dir_.File("good.json"), good.dump());
  EXPECT_EQ(Cli({"profiles", "import", dir_.File("good.json")}).exit_code, 0);
}

// A tuner with a live agent on a paced simulated board.
class LiveProfiles : public Profiles {
 protected:
  void SetUp() override {
    Profiles::SetUp();
    store_.reset();
    TunerOptions o;
    o.db_path = db_;
    o.refit_samples = 2000;
    auto tuner = TunerServer::Start("127.0.0.1:0", o);
    ASSERT_TRUE(tuner.ok()) << tuner.status();
    tuner_ = std::move(*tuner);
    auto source = MakeSampleSource("sim:litex-rocket-50mhz-slowcard", 5);
    ASSERT_TRUE(source.ok());
    auto sink = MakePolicySink("file:" + dir_.File("{device}.bin"), {"mmc0"});
    ASSERT_TRUE(sink.ok());
    AgentOptions a;
    a.tuner_address = tuner_->address();
    a.agent_id = "board-1";
    a.batch_size = 250;
    a.samples_per_second = 20000;
    a.spool_dir = "";
    agent_ = std::make_unique<Agent>(a, std::move(*source), std::move(*sink));
    run_ = std::thread([this] { result_ = agent_->Run(); });
  }
  void TearDown() override {
    if (agent_) agent_->Stop();
    if (run_.joinable()) run_.join();
    if (tuner_) tuner_->Shutdown(absl::Seconds(5));
  }
  bool WaitForApplied(uint64_t version) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (agent_->stats().applied_version != version) {
      if (absl::Now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  TargetSummary Target() {
    auto store = Store::Open(db_);
    EXPECT_TRUE(store.ok());
    auto t = (*store)->FindTarget("board-1");
    EXPECT_TRUE(t.ok() && t->has_value());
    return t.ok() && t->has_value() ? **t : TargetSummary{};
  }
  void WaitForSamples(uint64_t more) {
    const uint64_t until = agent_->stats().samples_generated + more;
    while (agent_->stats().samples_generated < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::unique_ptr<TunerServer> tuner_;
  std::unique_ptr<Agent> agent_;
  std::thread run_;
  absl::Status result_;
};

TEST_F(LiveProfiles, HeaderAndBlobFromAProfileAndRollbackReachesTheAgent) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (agent_->stats().applied_version == 0 && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string first = absl::StrCat(agent_->stats().applied_version);
  ASSERT_NE(first, "0") << "no table applied";
  auto saved = Cli({"profiles", "save", "v1", "--target", "board-1", "--version", first,
                    "--note", "first fit"});
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_EQ(Cli({"profiles", "save", "x", "--target", "nope"}).exit_code, 2);
  EXPECT_EQ(Cli({"profiles", "save", "x", "--target", "board-1", "--version", "99"}).exit_code, 2);

  // The header and blob of the profile prescribe the waits of the version
  // it holds (whose evidence comments may have grown since).
  auto from_profile = Cli({"header", "--profile", "v1"});
  auto from_target = Cli({"header", "board-1", "--version", first});
  ASSERT_EQ(from_profile.exit_code, 0) << from_profile.err;
  auto entries = [](const std::string& header) {
    std::string rows;
    std::istringstream in(header);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("\t{ ", 0) == 0) rows += line + "\n";
    }
    return rows;
  };
  EXPECT_NE(entries(from_profile.out), "");
  EXPECT_EQ(entries(from_profile.out), entries(from_target.out));
  ASSERT_EQ(Cli({"blob", "--profile", "v1", "-o", dir_.File("v1.spt")}).exit_code, 0);
  ASSERT_EQ(Cli({"blob", "board-1", "--version", first, "-o", dir_.File("t.spt")}).exit_code, 0);
  auto decoded = DecodePolicyBlob(testing::Slurp(dir_.File("v1.spt")));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(testing::Slurp(dir_.File("v1.spt")), testing::Slurp(dir_.File("t.spt")));
  EXPECT_EQ(Cli({"blob", "--profile", "v1", "--device", "sda", "-o", dir_.File("x")}).exit_code, 2);
  EXPECT_EQ(Cli({"header", "board-1", "--profile", "v1"}).exit_code, 2) << "two sources";

  // Rollback: a new version, pinned, pushed to the live agent.
  auto rolled = Cli({"profiles", "rollback", "board-1", "--to", "v1"});
  ASSERT_EQ(rolled.exit_code, 0) << rolled.err;
  const TargetSummary pinned = Target();
  ASSERT_GT(pinned.pinned_version, 1u);
  EXPECT_EQ(pinned.current_version, pinned.pinned_version);
  EXPECT_TRUE(WaitForApplied(pinned.pinned_version))
      << "applied " << agent_->stats().applied_version;
  auto targets = Cli({"targets", "--format", "json"});
  ASSERT_EQ(targets.exit_code, 0);
  EXPECT_EQ(json::parse(targets.out)["targets"][0]["pinned_version"], pinned.pinned_version);
  // Pinned: the samples of several refits change nothing.
  WaitForSamples(10000);
  EXPECT_EQ(Target().current_version, pinned.pinned_version);
  // Unpinned: the next refit stores a fitted version again.
  ASSERT_EQ(Cli({"profiles", "rollback", "board-1", "--unpin"}).exit_code, 0);
  WaitForSamples(10000);
  // The refit those samples call for runs on the fitter's thread, behind
  // ingest: wait for it (bounded) rather than for a fixed sample count.
  const absl::Time refit_deadline = absl::Now() + absl::Seconds(20);
  while (Target().current_version <= pinned.pinned_version && absl::Now() < refit_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(Target().current_version, pinned.pinned_version);
  EXPECT_EQ(Target().pinned_version, 0u);

  EXPECT_EQ(Cli({"profiles", "rollback", "board-1", "--to", "77"}).exit_code, 2);
  EXPECT_EQ(Cli({"profiles", "rollback", "board-1"}).exit_code, 2);
  EXPECT_EQ(Cli({"profiles", "rollback", "nobody", "--to", "1"}).exit_code, 2);
}

}  // namespace
}  // namespace spintune
