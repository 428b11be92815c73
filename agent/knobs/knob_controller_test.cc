#include "agent/knobs/knob_controller.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

// Knob values in memory, shared by the fake accessors and the test.
struct FakeBoard {
  std::mutex mu;
  std::map<std::string, std::string> raw;
  std::set<std::string> refuse;  // values a write fails with
  // Like a block queue: nr_requests above 128 fails under scheduler "none".
  bool queue_rules = false;
};

class FakeAccessor : public KnobAccessor {
 public:
  FakeAccessor(std::shared_ptr<FakeBoard> board, std::string knob)
      : board_(std::move(board)), knob_(std::move(knob)) {}
  absl::StatusOr<std::string> Read() override {
    std::lock_guard<std::mutex> lock(board_->mu);
    return board_->raw[knob_];
  }
  absl::Status Write(const std::string& raw) override {
    std::lock_guard<std::mutex> lock(board_->mu);
    if (board_->refuse.count(raw)) return absl::UnavailableError("EINVAL");
    if (board_->queue_rules && knob_ == "nr_requests" && std::stoi(raw) > 128 &&
        board_->raw["scheduler"] == "none") {
      return absl::UnavailableError("EINVAL");
    }
    board_->raw[knob_] = raw;
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<FakeBoard> board_;
  std::string knob_;
};

// Throughput: nr_requests / 2, unless the register's low field is 7 (errors).
class FakeWorkload : public KnobWorkload {
 public:
  explicit FakeWorkload(std::shared_ptr<FakeBoard> board) : board_(std::move(board)) {}
  absl::StatusOr<std::map<std::string, double>> Run() override {
    std::lock_guard<std::mutex> lock(board_->mu);
    const double depth = std::stod(board_->raw["nr_requests"]);
    const bool bad = (std::stoul(board_->raw["REG"], nullptr, 16) & 0xf) == 7;
    return std::map<std::string, double>{{"mbps", depth / 2}, {"errors", bad ? 3.0 : 0.0}};
  }

 private:
  std::shared_ptr<FakeBoard> board_;
};

KnobDeclaration Declaration() {
  KnobDeclaration d;
  d.name = "test-knobs";
  KnobSpec depth;
  depth.name = "nr_requests";
  depth.values = {32, 64};
  KnobSpec sched;
  sched.name = "scheduler";
  sched.labels = {"none", "mq-deadline"};
  KnobSpec reg;
  reg.name = "REG";
  reg.fields = {{"LO", 0, 4, {0, 3, 7}}, {"HI", 4, 4, {0, 1}}};
  d.knobs = {depth, sched, reg};
  d.metric = "mbps";
  d.constraints.push_back({"errors", std::nullopt, 0.0});
  return d;
}

struct Rig {
  std::shared_ptr<FakeBoard> board = std::make_shared<FakeBoard>();
  std::unique_ptr<KnobController> controller;
  std::vector<v1::AgentMessage> sent;
  std::mutex sent_mu;

  explicit Rig(const std::string& journal) {
    board->raw = {{"nr_requests", "256"}, {"scheduler", "kyber"}, {"REG", "0x00004465"}};
    Restart(journal);
  }
  void Restart(const std::string& journal) {
    controller.reset();
    std::vector<std::unique_ptr<KnobAccessor>> accessors;
    for (const char* k : {"nr_requests", "scheduler", "REG"}) {
      accessors.push_back(std::make_unique<FakeAccessor>(board, k));
    }
    controller = std::make_unique<KnobController>(Declaration(), journal, std::move(accessors),
                                                  std::make_unique<FakeWorkload>(board));
  }
  // Recover, declare and attach, as the agent does when a session comes up.
  void StartSession() {
    EXPECT_TRUE(controller->Recover().ok());
    EXPECT_TRUE(controller->Declare().ok());
    Attach();
  }
  void Attach() {
    controller->Attach([this](const v1::AgentMessage& m) {
      std::lock_guard<std::mutex> lock(sent_mu);
      sent.push_back(m);
      return true;
    });
  }
  v1::AgentMessage Command(const v1::KnobCommand& c) {
    controller->OnCommand(c);
    controller->WaitIdle();
    std::lock_guard<std::mutex> lock(sent_mu);
    EXPECT_FALSE(sent.empty());
    return sent.empty() ? v1::AgentMessage() : sent.back();
  }
  std::string Raw(const std::string& knob) {
    std::lock_guard<std::mutex> lock(board->mu);
    return board->raw[knob];
  }
};

v1::KnobCommand Trial(uint32_t n, int64_t depth, int64_t sched, int64_t lo, int64_t hi) {
  v1::KnobCommand c;
  c.set_experiment_id(5);
  c.mutable_trial()->set_trial(n);
  for (auto [coord, value] : {std::pair<const char*, int64_t>{"nr_requests", depth},
                              {"scheduler", sched}, {"REG.LO", lo}, {"REG.HI", hi}}) {
    auto* v = c.mutable_trial()->add_setting();
    v->set_coordinate(coord);
    v->set_value(value);
  }
  return c;
}

// An end leaving the board on `setting` (empty: the start values).
v1::KnobCommand End(std::vector<std::pair<const char*, int64_t>> setting = {}) {
  v1::KnobCommand c;
  c.set_experiment_id(5);
  c.mutable_end();
  for (auto [coord, value] : setting) {
    auto* v = c.mutable_end()->add_setting();
    v->set_coordinate(coord);
    v->set_value(value);
  }
  return c;
}

TEST(KnobController, DeclaresTheValuesInForceAsTheStart) {
  testing::TempDir dir;
  Rig rig(dir.File("j.json"));
  ASSERT_TRUE(rig.controller->Recover().ok());
  EXPECT_FALSE(rig.controller->busy());
  auto d = rig.controller->Declare();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(rig.controller->busy());
  ASSERT_EQ(d->knobs_size(), 3);
  // 256 and "kyber" were not declared: they become candidates.
  EXPECT_EQ(d->knobs(0).start_value(), 256);
  EXPECT_EQ(d->knobs(0).values_size(), 3);
  EXPECT_EQ(d->knobs(1).labels(2), "kyber");
  EXPECT_EQ(d->knobs(1).start_value(), 2);
  EXPECT_EQ(d->knobs(2).start_value(), 0x4465);
  EXPECT_EQ(d->knobs(2).fields(0).values_size(), 4);  // 0, 3, 7 and the 5 in force
  EXPECT_EQ(d->knobs(2).fields(1).values_size(), 3);  // 0, 1 and 6
  EXPECT_EQ(d->constraints(0).max(), 0);
}

TEST(KnobController, ATrialSetsReadsBackAndMeasures) {
  testing::TempDir dir;
  Rig rig(dir.File("j.json"));
  rig.StartSession();
  const v1::AgentMessage m = rig.Command(Trial(1, 64, 0, 3, 1));
  ASSERT_TRUE(m.has_knob_trial());
  EXPECT_EQ(m.knob_trial().trial(), 1u);
  EXPECT_EQ(m.knob_trial().error(), "");
  EXPECT_TRUE(m.knob_trial().constraints_ok());
  EXPECT_DOUBLE_EQ(m.knob_trial().metric(), 32);
  EXPECT_EQ(rig.Raw("nr_requests"), "64");
  EXPECT_EQ(rig.Raw("scheduler"), "none");
  EXPECT_EQ(rig.Raw("REG"), "0x00004413");  // the other bits kept
  // The baseline is on disk while the trial setting is in force.
  auto journal = LoadKnobJournal(dir.File("j.json"));
  ASSERT_TRUE(journal.ok());
  EXPECT_EQ(journal->experiment_id, 5u);
  EXPECT_EQ(journal->baseline.at("nr_requests"), "256");
  EXPECT_EQ(journal->baseline.at("scheduler"), "kyber");
}

TEST(KnobController, AFailedConstraintOrWriteRestoresTheStartAtOnce) {
  testing::TempDir dir;
  Rig rig(dir.File("j.json"));
  rig.StartSession();
  v1::AgentMessage m = rig.Command(Trial(1, 64, 1, 7, 0));  // LO = 7: errors
  EXPECT_FALSE(m.knob_trial().constraints_ok());
  EXPECT_EQ(rig.Raw("REG"), "0x00004465");
  EXPECT_EQ(rig.Raw("nr_requests"), "256");
  rig.board->refuse.insert("32");
  m = rig.Command(Trial(2, 32, 1, 3, 0));
  EXPECT_NE(m.knob_trial().error().find("EINVAL"), std::string::npos);
  EXPECT_EQ(rig.Raw("scheduler"), "kyber");
  EXPECT_EQ(rig.Raw("nr_requests"), "256");
}

TEST(KnobController, KnobsThatBoundEachOtherAreWrittenInAWorkingOrder) {
  testing::TempDir dir;
  Rig rig(dir.File("j.json"));
  rig.board->queue_rules = true;
  rig.board->raw["scheduler"] = "mq-deadline";
  rig.StartSession();
  // scheduler none with nr_requests 64, then back to the start (256 under
  // mq-deadline): nr_requests is written first and refused until the
  // scheduler changed.
  v1::AgentMessage m = rig.Command(Trial(1, 64, 0, 3, 1));
  EXPECT_EQ(m.knob_trial().error(), "");
  EXPECT_EQ(rig.Raw("scheduler"), "none");
  m = rig.Command(End());
  EXPECT_TRUE(m.knob_applied().ok()) << m.knob_applied().error();
  EXPECT_EQ(rig.Raw("nr_requests"), "256");
  EXPECT_EQ(rig.Raw("scheduler"), "mq-deadline");
}

TEST(KnobController, TheSessionEndingRestoresTheStartAndDropsItsCommands) {
  testing::TempDir dir;
  Rig rig(dir.File("j.json"));
  rig.StartSession();
  rig.Command(Trial(1, 64, 0, 3, 1));
  rig.controller->Detach();
  rig.controller->OnCommand(Trial(2, 32, 0, 3, 1));  // of no session: dropped
  rig.controller->WaitIdle();
  EXPECT_EQ(rig.Raw("nr_requests"), "256");
  EXPECT_EQ(rig.Raw("REG"), "0x00004465");
  EXPECT_FALSE(PathExists(dir.File("j.json")));
  EXPECT_TRUE(rig.controller->busy()) << "the experiment goes on when the agent is back";
}

TEST(KnobController, ARestartAfterACrashRestoresTheStart) {
  testing::TempDir dir;
  Rig rig(dir.File("j.json"));
  rig.StartSession();
  rig.Command(Trial(1, 64, 0, 3, 1));
  // kill -9 now: the journal and the trial setting stay as they are. (The
  // controller's clean exit would restore, so keep copies to put back.)
  std::filesystem::copy_file(dir.File("j.json"), dir.File("crash.json"));
  const auto trial_values = rig.board->raw;
  rig.controller.reset();
  rig.board->raw = trial_values;
  std::filesystem::rename(dir.File("crash.json"), dir.File("j.json"));
  ASSERT_EQ(rig.Raw("nr_requests"), "64");

  rig.Restart(dir.File("j.json"));
  ASSERT_TRUE(rig.controller->Recover().ok());
  EXPECT_EQ(rig.Raw("nr_requests"), "256");
  EXPECT_EQ(rig.Raw("scheduler"), "kyber");
  EXPECT_EQ(rig.Raw("REG"), "0x00004465");
  EXPECT_FALSE(PathExists(dir.File("j.json")));
}

TEST(KnobController, AnEndKeepsItsSettingAcrossRestarts) {
  testing::TempDir dir;
  Rig rig(dir.File("j.json"));
  rig.StartSession();
  rig.Command(Trial(1, 32, 0, 0, 0));
  const v1::AgentMessage m = rig.Command(End({{"REG.LO", 3}}));
  ASSERT_TRUE(m.has_knob_applied());
  EXPECT_TRUE(m.knob_applied().ok()) << m.knob_applied().error();
  EXPECT_FALSE(rig.controller->busy());
  // Only LO changed; the rest is back at the start.
  EXPECT_EQ(rig.Raw("REG"), "0x00004463");
  EXPECT_EQ(rig.Raw("nr_requests"), "256");
  bool saw_lo = false;
  for (const auto& s : m.knob_applied().setting()) {
    if (s.coordinate() == "REG.LO") saw_lo = s.value() == 3;
  }
  EXPECT_TRUE(saw_lo);
  // A reboot resets the register; the agent puts the setting back.
  rig.board->raw["REG"] = "0x00004465";
  rig.Restart(dir.File("j.json"));
  ASSERT_TRUE(rig.controller->Recover().ok());
  EXPECT_EQ(rig.Raw("REG"), "0x00004463");
}

TEST(KnobController, AnUnreadableJournalLeavesTheKnobsAlone) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.File("j.json"), "{not json").ok());
  Rig rig(dir.File("j.json"));
  EXPECT_TRUE(absl::IsDataLoss(rig.controller->Recover()));
}

}  // namespace
}  // namespace spintune
