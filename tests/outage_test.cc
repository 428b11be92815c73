// Tuner outages seen from a real agent with a spool: a paced simulated board
// keeps measuring while the tuner is away, nothing is lost or doubled when it
// comes back, an agent restarted during the outage resumes from its spool,
// a full spool drops the oldest batches and reports exactly how much, and a
// tuner that is up but defers every batch is not reconnected to at once.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "agent/agent.h"
#include "agent/policy_sink.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/session_metadata.h"
#include "spintune/v1/spintune.grpc.pb.h"
#include "storage/store.h"
#include "tests/testing/free_port.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait_for.h"
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

  // spool_bytes 0: no spool.
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
    if (spool_bytes > 0) o.spool_dir = dir_.File("spool");
    o.spool_max_bytes = spool_bytes;
    o.initial_backoff = absl::Milliseconds(50);
    o.max_backoff = absl::Milliseconds(200);
    o.drain_timeout = testing::kEventDeadline;  // waits for the final table
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
  // Measuring into the spool.
  EXPECT_TRUE(testing::WaitFor([&] { return agent->stats().samples_generated > 5000; }));
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
    EXPECT_TRUE(testing::WaitFor([&] { return agent->stats().samples_generated >= 2500; }));
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

// Without a spool a stopping agent waits up to drain_timeout (30 s here)
// for a tuner to acknowledge what it holds; asked to stop again (a second
// SIGINT), it stops at once and says how much was not acknowledged.
TEST_F(Outage, ASecondStopEndsTheWaitForATuner) {
  auto agent = MakeAgent(20000, /*spool_bytes=*/0);  // and no tuner
  absl::Status result;
  std::atomic<bool> done{false};
  std::thread run([&] {
    result = agent->Run();
    done = true;
  });
  EXPECT_TRUE(testing::WaitFor([&] { return agent->stats().samples_generated > 0; }));
  agent->Stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(done) << "the first stop waits for a tuner";
  const absl::Time second = absl::Now();
  agent->Stop();
  run.join();
  // At once: well inside the 30 s the first stop would have waited.
  EXPECT_LT(absl::Now() - second, absl::Seconds(5));
  EXPECT_EQ(result.code(), absl::StatusCode::kUnavailable) << result;
  EXPECT_NE(result.message().find("not acknowledged"), std::string::npos) << result;
}

TEST_F(Outage, FullSpoolDropsTheOldestAndTheTunerIsToldExactly) {
  const uint64_t batch_bytes = 250 * 12;  // about a batch's size on disk
  auto agent = MakeAgent(30000, 8 * batch_bytes);
  absl::Status result;
  std::thread run([&] { result = agent->Run(); });
  // The outage outlasts the spool.
  EXPECT_TRUE(testing::WaitFor([&] { return agent->stats().spool_dropped_samples > 0; }));
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

// A tuner that is up but stores nothing for a while: it takes every session
// and answers each batch as the real tuner does while its storage fails or
// the agent is over its rate (tuner/tuner_core.cc: Rejected UNAVAILABLE with
// retry, the stream left open); once accepting, it stores batches in seq
// order and acknowledges resends as duplicates, like the real one.
class DeferringTuner final : public v1::Tuner::Service {
 public:
  grpc::Status Session(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<v1::TunerMessage, v1::AgentMessage>* stream)
      override {
    v1::AgentMessage in;
    if (!stream->Read(&in) || !in.has_hello()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "first message must be Hello");
    }
    v1::TunerMessage out;
    {
      absl::MutexLock lock(&mu_);
      session_starts_.push_back(absl::Now());
      if (deferring_ && refuse_hello_) {
        // As the real tuner answers a Hello while its storage fails.
        context->AddTrailingMetadata(kRetryLaterTrailer, "1");
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "tuner storage unavailable; retry later");
      }
      out.mutable_hello_ack()->set_last_durable_seq(durable_seq_);
    }
    stream->Write(out);
    while (stream->Read(&in)) {
      if (!Answer(in, &out)) continue;
      stream->Write(out);
    }
    return grpc::Status::OK;
  }

  void Accept() {
    absl::MutexLock lock(&mu_);
    deferring_ = false;
  }
  // While deferring, refuse the Hello itself rather than each batch.
  void RefuseHellos() {
    absl::MutexLock lock(&mu_);
    refuse_hello_ = true;
  }
  std::vector<absl::Time> session_starts() const {
    absl::MutexLock lock(&mu_);
    return session_starts_;
  }
  uint64_t batches_deferred() const {
    absl::MutexLock lock(&mu_);
    return batches_deferred_;
  }
  uint64_t durable_seq() const {
    absl::MutexLock lock(&mu_);
    return durable_seq_;
  }
  uint64_t stored_samples() const {
    absl::MutexLock lock(&mu_);
    return stored_samples_;
  }

 private:
  bool Answer(const v1::AgentMessage& in, v1::TunerMessage* out) {
    out->Clear();
    absl::MutexLock lock(&mu_);
    if (in.has_drain()) {
      out->mutable_drained()->set_total_samples(stored_samples_);
      return true;
    }
    if (!in.has_batch()) return false;
    const uint64_t seq = in.batch().seq();
    if (deferring_ || seq > durable_seq_ + 1) {
      if (deferring_) ++batches_deferred_;
      auto* r = out->mutable_rejected();
      r->set_seq(seq);
      r->set_code(deferring_ ? grpc::StatusCode::UNAVAILABLE : grpc::StatusCode::OUT_OF_RANGE);
      r->set_message("tuner storage unavailable; resend later");
      r->set_retry(true);
      return true;
    }
    const bool duplicate = seq <= durable_seq_;
    if (!duplicate) {
      durable_seq_ = seq;
      stored_samples_ += static_cast<uint64_t>(in.batch().completions().wait_ns_size());
    }
    out->mutable_batch_ack()->set_seq(seq);
    out->mutable_batch_ack()->set_duplicate(duplicate);
    return true;
  }

  mutable absl::Mutex mu_;
  bool deferring_ ABSL_GUARDED_BY(mu_) = true;
  bool refuse_hello_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<absl::Time> session_starts_ ABSL_GUARDED_BY(mu_);
  uint64_t batches_deferred_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t durable_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t stored_samples_ ABSL_GUARDED_BY(mu_) = 0;
};

// The fake tuner on 127.0.0.1 port 0; *port: the port it listens on.
std::unique_ptr<grpc::Server> StartOnLoopback(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

// 5,000 simulated samples in batches of 250, backing off from 50 to 400 ms.
AgentOptions DeferralAgentOptions(int port, const std::string& agent_id) {
  AgentOptions o;
  o.tuner_address = absl::StrCat("127.0.0.1:", port);
  o.agent_id = agent_id;
  o.max_samples = 5000;
  o.batch_size = 250;
  o.initial_backoff = absl::Milliseconds(50);
  o.max_backoff = absl::Milliseconds(400);
  o.drain_timeout = testing::kEventDeadline;  // waits for the final table
  return o;
}

TEST(OutageDeferral, ATunerThatDefersIsNotHammeredAndNothingIsLostWhenItAccepts) {
  DeferringTuner service;
  int port = 0;
  std::unique_ptr<grpc::Server> server = StartOnLoopback(&service, &port);
  ASSERT_TRUE(server != nullptr && port > 0);
  auto source = MakeSampleSource("sim:microwatt-100mhz", 3);
  ASSERT_TRUE(source.ok()) << source.status();
  auto sink = MakePolicySink("none", {"mmc0"});
  ASSERT_TRUE(sink.ok()) << sink.status();
  AgentOptions o = DeferralAgentOptions(port, "deferred-board");
  Agent agent(o, std::move(*source), std::move(*sink));
  absl::Status result;
  std::thread run([&] { result = agent.Run(); });

  constexpr absl::Duration kDeferring = absl::Milliseconds(1600);
  absl::SleepFor(kDeferring);
  const std::vector<absl::Time> starts = service.session_starts();
  const uint64_t deferred = service.batches_deferred();
  service.Accept();
  run.join();
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));

  // Waits of 50, 100, 200, 400, 400... ms (+-20%): about 7 sessions in
  // 1.6 s, not one per round trip (before the fix: 2,000 to 2,800 here).
  ASSERT_GE(starts.size(), 3u) << "the agent kept trying";
  EXPECT_LE(starts.size(), 9u) << "sessions while the tuner deferred everything";
  EXPECT_LE(deferred, 9u * 16) << "batches resent to a tuner that stores nothing";
  // Once the tuner stores again, every batch is stored once.
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(service.durable_seq(), 5000u / 250);
  EXPECT_EQ(service.stored_samples(), 5000u);
  EXPECT_EQ(agent.stats().tuner_total_samples, 5000u);
  EXPECT_EQ(agent.stats().batches_rejected, 0u);
  // Each wait is at least 0.8 x the backoff, which doubles up to the cap.
  absl::Duration backoff = o.initial_backoff;
  for (size_t i = 1; i < starts.size(); ++i) {
    const absl::Duration wait = starts[i] - starts[i - 1];
    ASSERT_GE(wait, backoff * 0.8 - absl::Milliseconds(5)) << "wait before session " << i;
    backoff = std::min(backoff * 2, o.max_backoff);
  }
}

// Issue 51: a live tuner whose storage fails refuses the Hello itself with
// UNAVAILABLE. Before the fix the agent took that for an outage: it
// reconnected as soon as the channel was up (once per round trip) and, with
// --give-up-after, exited while the tuner was up and about to store again
// (the fleet check's "agent exits after 66 reconnects" under load).
TEST(OutageDeferral, ATunerThatRefusesTheHelloIsNeitherHammeredNorGivenUpOn) {
  DeferringTuner service;
  service.RefuseHellos();
  int port = 0;
  std::unique_ptr<grpc::Server> server = StartOnLoopback(&service, &port);
  ASSERT_TRUE(server != nullptr && port > 0);
  auto source = MakeSampleSource("sim:microwatt-100mhz", 3);
  ASSERT_TRUE(source.ok()) << source.status();
  auto sink = MakePolicySink("none", {"mmc0"});
  ASSERT_TRUE(sink.ok()) << sink.status();
  AgentOptions o = DeferralAgentOptions(port, "refused-board");
  o.give_up_after = absl::Milliseconds(300);  // far shorter than the refusals last
  Agent agent(o, std::move(*source), std::move(*sink));
  absl::Status result;
  std::thread run([&] { result = agent.Run(); });

  absl::SleepFor(absl::Milliseconds(1600));  // the scenario: 1.6 s of refusals
  const size_t refused = service.session_starts().size();
  service.Accept();
  run.join();
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));

  EXPECT_TRUE(result.ok()) << result << " (the agent gave up on a tuner that answered)";
  ASSERT_GE(refused, 2u) << "the agent kept trying";
  // One Hello per backoff (50, 100, 200, 400, 400 ms...), not one per round trip.
  EXPECT_LE(refused, 9u) << "Hellos while the tuner refused them";
  EXPECT_EQ(service.stored_samples(), 5000u);
  EXPECT_EQ(agent.stats().tuner_total_samples, 5000u);
}

}  // namespace
}  // namespace spintune
