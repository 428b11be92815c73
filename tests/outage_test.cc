// Tuner outages seen from a real agent with a spool: a paced simulated board
// keeps measuring while the tuner is away, nothing is lost or doubled when it
// comes back, an agent restarted during the outage resumes from its spool,
// and a full spool drops the oldest batches and reports exactly how much.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/policy_sink.h"
#include "gtest/gtest.h"
#include "storage/store.h"
#include "tests/testing/free_port.h"
#include "tests/testing/temp_dir.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

class Outage : public ::testing::Test {
 protected:
  void SetUp() override { address_ = "127.0.0.1:" + std::to_string(testing::FreePort()); }

  std::unique_ptr<TunerServer> StartTuner() {
    TunerOptions o;
    o.db_path = dir_.File("tuner.db");
    auto s = TunerServer::Start(address_, o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  std::unique_ptr<Agent> MakeAgent(uint64_t samples, uint64_t spool_bytes = 64 << 20) {
    auto source = MakeSampleSource("sim:microwatt-100mhz", 3);
    EXPECT_TRUE(source.ok());
    auto sink = MakePolicySink("none", {"mmc0"});
    AgentOptions o;
    o.tuner_address = address_;
    o.agent_id = "outage-board";
    o.max_samples = samples;
    o.batch_size = 250;
    o.samples_per_second = 40000;  // a board measuring in real time
    o.spool_dir = dir_.File("spool");
    o.spool_max_bytes = spool_bytes;
    o.initial_backoff = absl::Milliseconds(50);
    o.max_backoff = absl::Milliseconds(200);
    o.drain_timeout = absl::Seconds(10);
    return std::make_unique<Agent>(o, std::move(*source), std::move(*sink));
  }

  TargetSummary Stored() {
    auto store = Store::Open(dir_.File("tuner.db"));
    EXPECT_TRUE(store.ok());
    auto t = (*store)->FindTarget("outage-board");
    EXPECT_TRUE(t.ok() && t->has_value());
    return t.ok() && t->has_value() ? **t : TargetSummary{};
  }

  testing::TempDir dir_;
  std::string address_;
};

TEST_F(Outage, AgentStartedBeforeTheTunerLosesNothing) {
  auto agent = MakeAgent(20000);
  absl::Status result;
  std::thread run([&] { result = agent->Run(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // measuring into the spool
  const uint64_t spooled_before_tuner = agent->stats().samples_generated;
  auto tuner = StartTuner();
  run.join();
  ASSERT_TRUE(result.ok()) << result;
  EXPECT_GT(spooled_before_tuner, 5000u) << "the board kept measuring during the outage";
  EXPECT_EQ(agent->stats().tuner_total_samples, 20000u);
  EXPECT_EQ(Stored().total_samples, 20000u);
}

TEST_F(Outage, RestartDuringTheOutageResumesFromTheSpool) {
  {
    auto agent = MakeAgent(20000);
    absl::Status result;
    std::thread run([&] { result = agent->Run(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    agent->Stop();
    run.join();
    EXPECT_TRUE(result.ok()) << "unacknowledged batches are in the spool: " << result;
    EXPECT_GT(agent->stats().samples_generated, 0u);
    EXPECT_LT(agent->stats().samples_generated, 20000u);
  }
  auto tuner = StartTuner();
  auto agent = MakeAgent(20000);
  ASSERT_TRUE(agent->Run().ok());
  EXPECT_GT(agent->stats().restored_batches, 0u);
  EXPECT_EQ(agent->stats().tuner_total_samples, 20000u) << "nothing lost, nothing doubled";
  EXPECT_EQ(Stored().total_samples, 20000u);
}

TEST_F(Outage, FullSpoolDropsTheOldestAndTheTunerIsToldExactly) {
  const uint64_t batch_bytes = 250 * 12;  // about a batch's size on disk
  auto agent = MakeAgent(30000, 8 * batch_bytes);
  absl::Status result;
  std::thread run([&] { result = agent->Run(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  auto tuner = StartTuner();
  run.join();
  const AgentStats st = agent->stats();
  ASSERT_GT(st.spool_dropped_samples, 0u) << "the outage outlasted the spool";
  // Dropping data is never silent: the run ends in DataLoss saying how much.
  EXPECT_TRUE(absl::IsDataLoss(result)) << result;
  EXPECT_NE(result.message().find(absl::StrCat(st.spool_dropped_samples, " samples) dropped")),
            std::string::npos)
      << result;
  const TargetSummary t = Stored();
  EXPECT_EQ(t.total_samples + st.spool_dropped_samples, 30000u);
  EXPECT_EQ(t.dropped_samples, st.spool_dropped_samples);
  // The placeholders kept every seq: 120 batches, no gap.
  EXPECT_EQ(t.last_seq, 30000u / 250);
}

}  // namespace
}  // namespace spintune
