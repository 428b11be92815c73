#include "tuner/experiment_runner.h"

#include <deque>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

class FakeSession : public SessionHandle {
 public:
  void Send(v1::TunerMessage m) override { sent.push_back(std::move(m)); }
  void Fail(absl::Status s) override { failed = s; }
  bool open() const override { return failed.ok(); }
  void ResumeReading() override {}
  std::deque<v1::TunerMessage> sent;
  absl::Status failed;
};

v1::AgentMessage Declaration(uint32_t max_trials = 30) {
  v1::AgentMessage m;
  v1::KnobsDeclared* d = m.mutable_knobs_declared();
  d->set_name("queue");
  d->set_metric("mbps");
  d->set_max_trials(max_trials);
  d->set_seed(3);
  v1::Knob* k = d->add_knobs();
  k->set_name("depth");
  for (int v : {16, 32, 64, 128}) k->add_values(v);
  k->set_start_value(128);
  return m;
}

// The agent's answer to a trial command: mbps = depth.
v1::AgentMessage Answer(const v1::KnobCommand& c) {
  v1::AgentMessage m;
  v1::KnobTrial* t = m.mutable_knob_trial();
  t->set_experiment_id(c.experiment_id());
  t->set_trial(c.trial().trial());
  t->set_metric(static_cast<double>(c.trial().setting(0).value()));
  t->set_constraints_ok(true);
  return m;
}

struct Rig {
  testing::TempDir dir;
  std::unique_ptr<Store> store;
  std::unique_ptr<ExperimentRunner> runner;
  int64_t target = 0;
  Rig() {
    store = std::move(*Store::Open(dir.File("tuner.db")));
    TargetRecord t;
    t.agent_id = "board";
    t.board = "board";
    t.cpu_classes = {{"default", 1000, {}, 0}};
    t.devices = {{"disk", "drv", "", {}}};
    target = *store->UpsertTarget(t);
    runner = std::make_unique<ExperimentRunner>(store.get(), ExperimentRunnerOptions{});
  }
  std::shared_ptr<FakeSession> Session() {
    auto s = std::make_shared<FakeSession>();
    s->target_id = target;
    s->hello.set_agent_id("board");
    return s;
  }
  // Answers trials until an end comes; returns it.
  v1::KnobCommand RunToEnd(const std::shared_ptr<FakeSession>& s) {
    while (!s->sent.empty()) {
      v1::TunerMessage m = s->sent.front();
      s->sent.pop_front();
      if (m.has_knob() && m.knob().has_end()) return m.knob();
      if (m.has_knob()) runner->OnMessage(s, Answer(m.knob()));
    }
    ADD_FAILURE() << "no end";
    return {};
  }
};

TEST(ExperimentRunner, RunsAnExperimentToItsEndAndStoresIt) {
  Rig rig;
  auto s = rig.Session();
  rig.runner->OnMessage(s, Declaration());
  const v1::KnobCommand end = rig.RunToEnd(s);
  auto r = rig.store->LatestExperiment(rig.target, "queue");
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->state, "finished");
  EXPECT_EQ((*r)->verdict, "start_is_best") << (*r)->statement;  // depth 128 is the best
  EXPECT_TRUE(end.end().setting().empty()) << "the start values";
  EXPECT_EQ(end.end().statement(), (*r)->statement);
  // The same declaration again: told how the experiment ended, no new one.
  rig.runner->OnMessage(s, Declaration());
  ASSERT_EQ(s->sent.size(), 1u);
  EXPECT_TRUE(s->sent.front().knob().has_end());
  EXPECT_EQ(rig.store->ListExperiments(0)->size(), 1u);
}

TEST(ExperimentRunner, ASecondSessionTakesTheExperimentOverSafely) {
  Rig rig;
  auto a = rig.Session();
  rig.runner->OnMessage(a, Declaration());
  ASSERT_EQ(a->sent.size(), 1u);
  const v1::KnobCommand first = a->sent.front().knob();
  rig.runner->OnMessage(a, Answer(first));  // trial 1 stored
  auto b = rig.Session();                   // the agent reconnected; a is not closed yet
  rig.runner->OnMessage(b, Declaration());
  ASSERT_EQ(b->sent.size(), 1u);
  EXPECT_EQ(b->sent.front().knob().trial().trial(), 2u) << "resumed after trial 1";
  rig.runner->OnMessage(a, Answer(a->sent.back().knob()));  // a's late answer: ignored
  rig.runner->OnSessionEnd(a.get());                        // a closes: b keeps it
  rig.RunToEnd(b);
  auto r = rig.store->LatestExperiment(rig.target, "queue");
  EXPECT_EQ((*r)->state, "finished");
}

TEST(ExperimentRunner, ABadDeclarationIsRefusedAndEnded) {
  Rig rig;
  auto s = rig.Session();
  v1::AgentMessage m = Declaration();
  m.mutable_knobs_declared()->mutable_knobs(0)->add_labels("x");  // two domains
  rig.runner->OnMessage(s, m);
  ASSERT_EQ(s->sent.size(), 2u);
  EXPECT_EQ(s->sent[0].rejected().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(s->sent[0].rejected().message().find("knobs_declared.knobs[0]"), std::string::npos);
  EXPECT_TRUE(s->sent[1].knob().has_end());
  EXPECT_EQ(s->sent[1].knob().experiment_id(), 0u);
  EXPECT_TRUE(rig.store->ListExperiments(0)->empty());
}

TEST(ExperimentRunner, AnAbortRequestedInTheDatabaseEndsItOnTheStart) {
  Rig rig;
  auto s = rig.Session();
  rig.runner->OnMessage(s, Declaration(60));
  const v1::KnobCommand trial = s->sent.front().knob();
  s->sent.clear();
  rig.runner->OnMessage(s, Answer(trial));
  rig.runner->Tick();
  EXPECT_TRUE(s->sent.back().knob().has_trial());
  // `spintune experiments abort`: another process, another connection.
  auto cli = Store::Open(rig.dir.File("tuner.db"), {}, OpenMode::kExisting);
  ASSERT_TRUE(cli.ok());
  ASSERT_TRUE((*cli)->RequestAbort(static_cast<int64_t>(trial.experiment_id())).ok());
  rig.runner->Tick();
  ASSERT_FALSE(s->sent.empty());
  EXPECT_TRUE(s->sent.back().knob().has_end());
  EXPECT_TRUE(s->sent.back().knob().end().setting().empty());
  auto r = rig.store->LoadExperiment(static_cast<int64_t>(trial.experiment_id()));
  EXPECT_EQ(r->state, "aborted");
  EXPECT_NE(r->statement.find("after 1 trials"), std::string::npos) << r->statement;
}

}  // namespace
}  // namespace spintune
