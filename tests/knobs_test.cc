// Knob experiments end to end over the Session (issue 13): the simulated
// ahci_sunxi board with an in-process agent, and knobs in plain files
// driven by the agent binary (kill -9 mid-experiment, abort from the CLI).
// The root-only block queue experiment is in queue_knobs_test.cc.
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "agent/agent.h"
#include "agent/knobs/knob_controller.h"
#include "agent/knobs/knob_only_source.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "agent/policy_sink.h"
#include "agent/sample_source.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "storage/store.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

using nlohmann::json;

std::string Cli(const testing::TempDir& dir, std::vector<std::string> args, int* code = nullptr) {
  args.insert(args.begin(), {SPINTUNE_CLI_BIN, "--db", dir.File("tuner.db")});
  testing::RunResult r = testing::Run(args, dir.path().string());
  if (code) {
    *code = r.exit_code;
  } else {
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  return r.out;
}

absl::Status RunSimAgent(const std::string& address, const testing::TempDir& dir) {
  auto declaration = SimKnobDeclaration("ahci-sunxi-a20-txts5-rxts6");
  if (!declaration.ok()) return declaration.status();
  auto controller = KnobController::Create(*declaration, dir.File("state/bpi-r1.knobs.json"), 3);
  if (!controller.ok()) return controller.status();
  if (absl::Status s = (*controller)->Recover(); !s.ok()) return s;
  AgentOptions options;
  options.tuner_address = address;
  options.agent_id = "bpi-r1";
  options.state_dir = dir.File("state");
  options.give_up_after = absl::Seconds(20);
  options.knobs = std::move(*controller);
  auto sink = MakePolicySink("none", {"ata1"});
  Agent agent(options, std::make_unique<KnobOnlySource>(*declaration, "host"), std::move(*sink));
  return agent.Run();
}

TEST(Knobs, TheAhciSunxiExperimentRunsOverTheSessionAndShipsLikeATable) {
  testing::TempDir dir;
  TunerOptions options;
  options.db_path = dir.File("tuner.db");
  auto tuner = TunerServer::Start("127.0.0.1:0", options);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  ASSERT_TRUE(RunSimAgent((*tuner)->address(), dir).ok());

  auto store = Store::Open(options.db_path, {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok());
  auto all = (*store)->ListExperiments(0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  const ExperimentRecord r = (*all)[0];
  EXPECT_EQ(r.state, "finished");
  EXPECT_EQ(r.verdict, "better");
  EXPECT_EQ(r.space.Format(r.start), "TXTS=5,RXTS=6");
  EXPECT_EQ(r.applied[0], 3) << r.statement;  // TXTS on the plateau
  EXPECT_LE(r.applied[1], 6) << r.statement;  // RXTS within 5% of the best
  EXPECT_LT(r.trials, 128u);
  EXPECT_GT(r.ci_low, 2.5) << "the seed: 36-45 -> 120-129 MB/s";
  EXPECT_EQ(r.end_result, "ok");
  // The agent keeps the setting for its next start.
  auto journal = LoadKnobJournal(dir.File("state/bpi-r1.knobs.json"));
  ASSERT_TRUE(journal.ok());
  EXPECT_EQ(journal->experiment_id, 0u);
  EXPECT_EQ(journal->applied.at("P0DMACR"),
            absl::StrFormat("0x%08x", 0x4400 | r.applied[1] << 4 | r.applied[0]));

  // spintune experiments.
  const json list = json::parse(Cli(dir, {"experiments", "list", "--format", "json"}));
  ASSERT_EQ(list["experiments"].size(), 1u);
  EXPECT_EQ(list["experiments"][0]["verdict"], "better");
  const json show = json::parse(
      Cli(dir, {"experiments", "show", std::to_string(r.id), "--format", "json"}));
  EXPECT_EQ(show["trial_log"].size(), r.trials);
  EXPECT_EQ(show["settings"][0]["setting"]["P0DMACR.TXTS"], 3) << "best first";
  EXPECT_EQ(show["statement"], r.statement);
  const std::string table = Cli(dir, {"experiments", "show", std::to_string(r.id)});
  EXPECT_NE(table.find("conclusion: TXTS=3"), std::string::npos) << table;
  EXPECT_NE(table.find("(confirmed by the agent)"), std::string::npos) << table;
  int code = 0;
  Cli(dir, {"experiments", "abort", std::to_string(r.id)}, &code);
  EXPECT_EQ(code, 1) << "a finished experiment cannot be aborted";

  // The report, the release header and profiles carry it.
  Cli(dir, {"report", "--target", "bpi-r1", "-o", dir.File("r.html")});
  const std::string html = testing::Slurp(dir.File("r.html"));
  EXPECT_NE(html.find("Experiment " + std::to_string(r.id) + ": ahci0-dma"), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"experiment-settings\""), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"experiment-trials\""), std::string::npos);
  Cli(dir, {"header", "bpi-r1", "-o", dir.File("spintune_bpi.h")});
  const std::string header = testing::Slurp(dir.File("spintune_bpi.h"));
  EXPECT_NE(header.find("#define SPINTUNE_KNOB_P0DMACR_TXTS 3\n"), std::string::npos) << header;
  EXPECT_NE(header.find("#define SPINTUNE_KNOB_P0DMACR_MASK 0x000000ffu"), std::string::npos);
  EXPECT_NE(header.find(" * TXTS=3"), std::string::npos) << "the evidence is in a comment";
  std::ofstream(dir.File("use.c")) << "#include \"spintune_bpi.h\"\n"
                                      "unsigned v = SPINTUNE_KNOB_P0DMACR_VALUE;\n";
  testing::RunResult cc = testing::Run(
      {"/usr/bin/cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
       "-I" SPINTUNE_SOURCE_DIR "/driver/include", "-I" + dir.path().string(), dir.File("use.c")},
      dir.path().string());
  EXPECT_EQ(cc.exit_code, 0) << cc.err;
  Cli(dir, {"profiles", "save", "dma-v1", "--target", "bpi-r1"});
  const json profile = json::parse(Cli(dir, {"profiles", "show", "dma-v1", "--format", "json"}));
  ASSERT_EQ(profile["knobs"].size(), 2u);
  EXPECT_EQ(profile["knobs"][0]["coordinate"], "P0DMACR.TXTS");
  EXPECT_EQ(profile["knobs"][0]["value"], 3);

  // A restarted agent re-applies the setting, declares the same knobs and
  // is told to keep it: no second experiment.
  ASSERT_TRUE(RunSimAgent((*tuner)->address(), dir).ok());
  EXPECT_EQ((*store)->ListExperiments(0)->size(), 1u);
  (*tuner)->Shutdown(absl::Seconds(2));
}

TEST(Knobs, ARollbackPushesKnobSettingsToTheConnectedAgent) {
  testing::TempDir dir;
  TunerOptions options;
  options.db_path = dir.File("tuner.db");
  options.refit_samples = 1'000'000'000;  // no table: the profiles are knob-only
  auto tuner = TunerServer::Start("127.0.0.1:0", options);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  auto declaration = SimKnobDeclaration("ahci-sunxi-a20-txts0-rxts0");
  ASSERT_TRUE(declaration.ok());
  const std::string journal = dir.File("state/lamobo.knobs.json");
  auto controller = KnobController::Create(*declaration, journal, 5);
  ASSERT_TRUE(controller.ok() && (*controller)->Recover().ok());
  // A long-running agent (a paced simulated source) stays connected.
  AgentOptions agent_options;
  agent_options.tuner_address = (*tuner)->address();
  agent_options.agent_id = "lamobo";
  agent_options.samples_per_second = 500;
  agent_options.state_dir = dir.File("state");
  agent_options.knobs = std::move(*controller);
  auto source = MakeSampleSource("sim:microwatt-100mhz", 5);
  auto sink = MakePolicySink("none", {"mmc0"});
  ASSERT_TRUE(source.ok() && sink.ok());
  Agent agent(agent_options, std::move(*source), std::move(*sink));
  std::thread runner([&] { EXPECT_TRUE(agent.Run().ok()); });

  auto store = Store::Open(options.db_path, {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok());
  auto applied = [&] {
    auto j = LoadKnobJournal(journal);
    return j.ok() && j->applied.count("P0DMACR") ? j->applied.at("P0DMACR") : "";
  };
  // The journal holds each trial's setting while the experiment runs: wait
  // for the experiment to finish, then for the agent to apply its winner.
  auto finished = [&] {
    auto experiments = (*store)->ListExperiments(0);
    return experiments.ok() && experiments->size() == 1 &&
           (*experiments)[0].state == "finished";
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!finished() && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The register value's last hex digit is TXTS, the one before it RXTS.
  // TXTS=3 is a clear optimum; RXTS 2 and 3 differ by 1.5%, within the
  // simulated noise, so the experiment may settle on either.
  auto txts = [&] {
    const std::string value = applied();
    return value.size() == 10 ? value.back() : '?';
  };
  while (finished() && txts() != '3' && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string winner = applied();
  if (!finished() || txts() != '3') {
    agent.Stop();  // no joinable thread left behind by the failure
    runner.join();
    (*tuner)->Shutdown(absl::Seconds(2));
    FAIL() << "experiment finished: " << finished() << "; applied " << winner
           << ", expected the experiment's winner TXTS=3 (…3)";
  }
  // Profile v2: the same with TXTS=2, made by editing an export.
  Cli(dir, {"profiles", "save", "v1", "--target", "lamobo"});
  json v2 = json::parse(Cli(dir, {"profiles", "export", "v1", "-o", "-"}));
  v2["name"] = "v2";
  v2["knobs"][0]["value"] = 2;
  v2["knobs"][0]["label"] = "2";
  std::ofstream(dir.File("v2.json")) << v2.dump();
  Cli(dir, {"profiles", "import", dir.File("v2.json")});
  const std::string diff = Cli(dir, {"profiles", "diff", "v1", "v2"});
  EXPECT_NE(diff.find("ahci0-dma P0DMACR.TXTS  3"), std::string::npos) << diff;
  const json diff_json = json::parse(Cli(dir, {"profiles", "diff", "v1", "v2", "--format", "json"}));
  EXPECT_EQ(diff_json["knobs"][0]["b"], "2");
  EXPECT_TRUE(diff_json["knobs"][0]["changed"]);
  EXPECT_NE(Cli(dir, {"profiles", "rollback", "lamobo", "--to", "v2"}).find("2 knob settings"),
            std::string::npos);
  // The tuner notices within a second and the agent applies it.
  // v2 differs in TXTS only: the winner's register value ending in 2.
  const std::string rolled_back = winner.substr(0, winner.size() - 1) + "2";
  const absl::Time pushed = absl::Now() + absl::Seconds(10);
  while (applied() != rolled_back && absl::Now() < pushed) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(applied(), rolled_back);
  EXPECT_EQ((*store)->ListExperiments(0)->size(), 1u) << "no new experiment";
  agent.Stop();
  runner.join();
  (*tuner)->Shutdown(absl::Seconds(2));
}

// Knobs in files, a command workload whose throughput grows with knob a.
constexpr char kFileKnobs[] = R"({
  "name": "NAME", "board": "file-board", "device": "disk0",
  "knobs": [
    {"name": "a", "file": "DIR/a", "values": [0, 3, 6, 9]},
    {"name": "mode", "file": "DIR/mode", "enum": ["fast", "slow"]}
  ],
  "workload": {"command": "sleep SLEEP; echo mbps=$((100 + 10 * $(cat DIR/a))) errors=0"},
  "metric": "mbps", "constraints": [{"metric": "errors", "max": 0}], "max_trials": 40
})";

void WriteDeclaration(const testing::TempDir& dir, const std::string& name, const char* sleep) {
  std::string text = kFileKnobs;
  for (auto [from, to] : {std::pair<std::string, std::string>{"NAME", name},
                          {"DIR", dir.path().string()}, {"SLEEP", sleep}}) {
    for (size_t at; (at = text.find(from)) != std::string::npos;) text.replace(at, from.size(), to);
  }
  std::ofstream(dir.File(name + ".json")) << text;
  std::ofstream(dir.File("a")) << "3\n";
  std::ofstream(dir.File("mode")) << "[slow] fast\n";  // a sysfs-style list
}

pid_t SpawnAgent(const std::string& address, const testing::TempDir& dir, const std::string& name,
                 const std::string& log) {
  return testing::Spawn({SPINTUNE_AGENT_BIN, "--tuner", address, "--agent-id", "files",
                         "--knobs", dir.File(name + ".json"), "--state-dir", dir.File("state"),
                         "--give-up-after", "20"},
                        dir.File(log + ".out"), dir.File(log + ".err"));
}

std::string Read(const testing::TempDir& dir, const std::string& file) {
  auto text = ReadFileToString(dir.File(file));
  return text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "";
}

// The mode in force: "[slow] fast" or "slow" -> "slow".
std::string Mode(const testing::TempDir& dir) {
  const std::string text = Read(dir, "mode");
  const size_t open = text.find('['), close = text.find(']');
  return open == std::string::npos ? text : text.substr(open + 1, close - open - 1);
}

TEST(Knobs, KillNineMidExperimentRestoresAtRestartAndTheExperimentGoesOn) {
  testing::TempDir dir;
  WriteDeclaration(dir, "files", "0.03");
  TunerOptions options;
  options.db_path = dir.File("tuner.db");
  auto tuner = TunerServer::Start("127.0.0.1:0", options);
  ASSERT_TRUE(tuner.ok()) << tuner.status();

  const pid_t victim = SpawnAgent((*tuner)->address(), dir, "files", "a1");
  // The agent writes a knob file as sysfs takes it (truncate, then write):
  // an empty read is a write in progress, not a change.
  auto trial_in_force = [&] {
    const std::string a = Read(dir, "a"), mode = Mode(dir);
    return (!a.empty() && a != "3") || (!mode.empty() && mode != "slow");
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!trial_in_force() && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  EXPECT_EQ(testing::WaitExit(victim), -1);
  const bool changed = Read(dir, "a") != "3" || Mode(dir) != "slow";
  ASSERT_TRUE(changed) << "killed before any trial setting was in force";
  ASSERT_TRUE(PathExists(dir.File("state/files.knobs.json")));

  const pid_t again = SpawnAgent((*tuner)->address(), dir, "files", "a2");
  EXPECT_EQ(testing::WaitExit(again), 0) << testing::Slurp(dir.File("a2.err"));
  const std::string log = testing::Slurp(dir.File("a2.err"));
  EXPECT_NE(log.find("start values restored (the agent restarted mid-experiment)"),
            std::string::npos) << log;
  auto store = Store::Open(options.db_path, {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok());
  auto target = (*store)->FindTarget("files");
  ASSERT_TRUE(target.ok() && target->has_value());
  auto r = (*store)->LatestExperiment((*target)->id, "files");
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->state, "finished");
  EXPECT_EQ((*r)->verdict, "better") << (*r)->statement;
  EXPECT_EQ((*r)->space.Format((*r)->applied).substr(0, 4), "a=9,") << (*r)->statement;
  EXPECT_EQ((*r)->end_result, "ok");
  EXPECT_EQ(Read(dir, "a"), "9") << "the winner is applied";
  (*tuner)->Shutdown(absl::Seconds(2));
}

TEST(Knobs, AbortFromTheCliEndsTheExperimentOnTheStartValues) {
  testing::TempDir dir;
  WriteDeclaration(dir, "slow", "0.2");
  TunerOptions options;
  options.db_path = dir.File("tuner.db");
  auto tuner = TunerServer::Start("127.0.0.1:0", options);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  const pid_t agent = SpawnAgent((*tuner)->address(), dir, "slow", "agent");
  auto store = Store::Open(options.db_path, {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  int64_t id = 0;
  while (absl::Now() < deadline) {
    auto all = (*store)->ListExperiments(0);
    if (all.ok() && !all->empty() && (*all)[0].trials >= 2) {
      id = (*all)[0].id;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(id, 0);
  const std::string out = Cli(dir, {"experiments", "abort", std::to_string(id)});
  EXPECT_NE(out.find("abort requested"), std::string::npos);
  EXPECT_EQ(testing::WaitExit(agent), 0) << testing::Slurp(dir.File("agent.err"));
  auto r = (*store)->LoadExperiment(id);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, "aborted");
  EXPECT_NE(r->statement.find("aborted by spintune experiments abort"), std::string::npos);
  EXPECT_LT(r->trials, 40u);
  EXPECT_EQ(Read(dir, "a"), "3");
  EXPECT_EQ(Read(dir, "mode"), "slow") << "written back as the value in force";
  EXPECT_FALSE(PathExists(dir.File("state/files.knobs.json")));
  (*tuner)->Shutdown(absl::Seconds(2));
}

}  // namespace
}  // namespace spintune
