// What a hostile or broken client found (issue #17), each reproduced with raw
// gRPC clients against a real tuner: sequence numbers that do not follow
// the durable one, a client writing for another agent id, storage read
// failures, floods that used to stall every other agent, unbounded strings,
// streams that never say hello, and sessions that were never forgotten.
#include <signal.h>

#include <fstream>
#include <thread>

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "agent/batch_spool.h"
#include "agent/agent.h"
#include "agent/policy_sink.h"
#include "gtest/gtest.h"
#include "storage/store.h"
#include "tests/testing/raw_session.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait_for.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

using testing::GoodBatch;
using testing::GoodHello;
using testing::RawSession;

class Hostile : public ::testing::Test {
 protected:
  void StartTuner(TunerOptions options = {}) {
    options.db_path = dir_.File("tuner.db");
    if (options.refit_samples == 4096) options.refit_samples = 1'000'000;
    auto s = TunerServer::Start("127.0.0.1:0", options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  TargetSummary Stored(const std::string& agent_id) {
    auto store = Store::Open(dir_.File("tuner.db"));
    EXPECT_TRUE(store.ok());
    auto t = (*store)->FindTarget(agent_id);
    return t.ok() && t->has_value() ? **t : TargetSummary{};
  }
  // One batch on a fresh stream; the tuner's answer.
  v1::TunerMessage SendOne(const std::string& agent_id, const v1::SampleBatch& batch) {
    RawSession s(server_->address());
    s.Open(GoodHello(agent_id));
    EXPECT_TRUE(s.SendBatch(batch));
    v1::TunerMessage m;
    EXPECT_TRUE(s.Read(&m));
    s.Finish();
    return m;
  }
  // Resends seq 1 of `agent_id` (stored with 10 samples) twice: the same
  // batch is a duplicate, one with 11 samples a conflict. The conflict.
  v1::TunerMessage ExpectResendsDuplicateThenConflict(const std::string& agent_id) {
    v1::TunerMessage same = SendOne(agent_id, GoodBatch(1, 10));
    EXPECT_TRUE(same.has_batch_ack()) << same.DebugString();
    EXPECT_TRUE(same.batch_ack().duplicate());
    v1::TunerMessage other = SendOne(agent_id, GoodBatch(1, 11));
    EXPECT_TRUE(other.has_rejected()) << other.DebugString();
    EXPECT_EQ(other.rejected().code(), grpc::ALREADY_EXISTS);
    return other;
  }

  testing::TempDir dir_;
  std::unique_ptr<TunerServer> server_;
};

// Issue #17 item 2: seqs 5,3,3,1,2,4,10,10,7,2^64-1,2^63 were all
// acknowledged and stored (negative seqs included). Only the next one is.
TEST_F(Hostile, SeqsThatDoNotFollowTheDurableOneAreRefused) {
  StartTuner();
  const uint64_t seqs[] = {5, 3, 3, 1, 2, 4, 10, 10, 7, ~uint64_t{0}, uint64_t{1} << 63};
  std::vector<uint64_t> acked;
  for (uint64_t seq : seqs) {
    SCOPED_TRACE(seq);
    const v1::TunerMessage m = SendOne("gappy", GoodBatch(seq, 10));
    if (m.has_batch_ack()) {
      EXPECT_FALSE(m.batch_ack().duplicate());
      acked.push_back(seq);
      continue;
    }
    ASSERT_TRUE(m.has_rejected()) << m.DebugString();
    EXPECT_EQ(m.rejected().code(), grpc::OUT_OF_RANGE);
    EXPECT_TRUE(m.rejected().retry()) << "nothing of it is stored: the agent may resend in order";
    EXPECT_NE(m.rejected().message().find("does not follow the last durable seq"),
              std::string::npos)
        << m.rejected().message();
  }
  EXPECT_EQ(acked, (std::vector<uint64_t>{1, 2}));
  const TargetSummary t = Stored("gappy");
  EXPECT_EQ(t.last_seq, 2u);
  EXPECT_EQ(t.total_samples, 20u);
  // On one stream, a refused seq also refuses what follows (retry), so the
  // agent resends in order.
  RawSession s(server_->address());
  s.Open(GoodHello("gappy"));
  ASSERT_TRUE(s.SendBatch(GoodBatch(9, 10)));
  ASSERT_TRUE(s.SendBatch(GoodBatch(3, 10)));
  v1::TunerMessage m;
  ASSERT_TRUE(s.Read(&m));
  EXPECT_EQ(m.rejected().code(), grpc::OUT_OF_RANGE);
  ASSERT_TRUE(s.Read(&m));
  EXPECT_TRUE(m.has_rejected() && m.rejected().retry()) << m.DebugString();
  s.Finish();
  EXPECT_EQ(Stored("gappy").last_seq, 2u);
}

// A resend is acknowledged as a duplicate only with the content stored.
TEST_F(Hostile, AResentSeqWithOtherContentIsAConflict) {
  StartTuner();
  ASSERT_TRUE(SendOne("resender", GoodBatch(1, 10)).has_batch_ack());
  const v1::TunerMessage other = ExpectResendsDuplicateThenConflict("resender");
  EXPECT_FALSE(other.rejected().retry());
  EXPECT_EQ(Stored("resender").total_samples, 10u);
  EXPECT_EQ(server_->core()->counters().batches_conflict, 1u);
}

// Exactly-once across the fingerprint upgrade (migration 12): a batch stored
// by a tuner that fingerprinted its serialization (version 1) and resent to
// this one, which fingerprints the bytes received, is still a duplicate,
// and other content under its seq still a conflict. (The row is made
// version 1 by hand; its value is the same: an agent on protobuf's C++
// library sends what serializing the batch again gives.)
TEST_F(Hostile, AResendOfABatchStoredBeforeTheFingerprintUpgradeIsADuplicate) {
  StartTuner();
  ASSERT_TRUE(SendOne("upgraded", GoodBatch(1, 10)).has_batch_ack());
  server_.reset();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir_.File("tuner.db").c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, "UPDATE ingested SET fingerprint_version = 1", nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
    EXPECT_EQ(sqlite3_changes(db), 1);
    sqlite3_close(db);
  }
  StartTuner();
  ExpectResendsDuplicateThenConflict("upgraded");
  EXPECT_EQ(Stored("upgraded").total_samples, 10u);
}

// Issue #17 item 2: a batch with seq 20 sent for another agent id made that
// agent resume after 20 and silently skip its real batches 16-20. Now a seq
// beyond the next is refused; one that is next is stored (without tokens any
// client may report for any agent id), and the real agent's batch with that
// seq is then refused as a conflict: its run ends in DataLoss saying so.
TEST_F(Hostile, ABatchForAnotherAgentIdIsNeverSilentlyCountedForIt) {
  StartTuner();
  auto run = [&](uint64_t samples) {
    auto source = MakeSampleSource("sim:microwatt-100mhz", 11);
    auto sink = MakePolicySink("none", {"mmc0"});
    AgentOptions o;
    o.tuner_address = server_->address();
    o.agent_id = "victim";
    o.max_samples = samples;
    o.batch_size = 100;
    o.spool_dir = dir_.File("spool");
    o.initial_backoff = absl::Milliseconds(20);
    o.drain_timeout = testing::kEventDeadline;  // waits for the final table
    Agent agent(o, std::move(*source), std::move(*sink));
    absl::Status s = agent.Run();
    return std::make_pair(s, agent.stats());
  };
  ASSERT_TRUE(run(1500).first.ok());  // seq 1..15 stored
  // A foreign seq 20: refused, nothing stored.
  v1::TunerMessage far = SendOne("victim", GoodBatch(20, 10));
  ASSERT_TRUE(far.has_rejected());
  EXPECT_EQ(far.rejected().code(), grpc::OUT_OF_RANGE);
  EXPECT_EQ(Stored("victim").last_seq, 15u);
  // The victim carries on to 2000: exactly its samples.
  auto [ok_status, ok_stats] = run(2000);
  ASSERT_TRUE(ok_status.ok()) << ok_status;
  EXPECT_EQ(Stored("victim").total_samples, 2000u);
  // A foreign seq 21 (the next one) is stored; the victim's own 21 is then
  // refused as a conflict, and the victim says so.
  ASSERT_TRUE(SendOne("victim", GoodBatch(21, 10)).has_batch_ack());
  auto [lost_status, lost_stats] = run(2500);
  EXPECT_TRUE(absl::IsDataLoss(lost_status)) << lost_status;
  EXPECT_EQ(lost_stats.batches_rejected, 1u);
  EXPECT_EQ(lost_stats.samples_rejected, 100u);
  EXPECT_NE(lost_status.message().find("1 batches (100 samples) refused"), std::string::npos)
      << lost_status;
  EXPECT_EQ(Stored("victim").total_samples, 2000u + 10 + 400);
  EXPECT_GE(server_->core()->counters().batches_conflict, 1u);
}

// Issue #17 item 5: a 15 MB PolicyApplied.error, ten times, was stored and
// logged whole (log +157 MB, RSS 23 -> 289 MB), and a newline in it forged a
// line of the tuner's log. Every string that reaches the log or the
// database is bounded and escaped.
TEST_F(Hostile, ClientStringsAreBoundedAndEscapedInTheLogAndTheDatabase) {
  testing::TempDir dir;
  const pid_t tuner = testing::Spawn(
      {SPINTUNE_TUNER_BIN, "--listen", "127.0.0.1:0", "--db", dir.File("tuner.db")},
      dir.File("tuner.out"), dir.File("tuner.err"));
  const std::string address = testing::WaitForLine(dir.File("tuner.out"), "listening on ");
  ASSERT_FALSE(address.empty());
  {
    RawSession s(address);
    s.Open(GoodHello("talkative"));
    v1::AgentMessage m;
    m.mutable_applied()->set_version(1);
    m.mutable_applied()->set_ok(false);
    m.mutable_applied()->set_error("refused\n2026-11-30T00:00:00.000 info spintune: FORGED " +
                                   std::string(15 << 20, 'x'));
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.Send(m));
    // A batch after them is acknowledged: they were handled.
    ASSERT_TRUE(s.SendBatch(GoodBatch(1, 10)));
    v1::TunerMessage ack;
    ASSERT_TRUE(s.Read(&ack));
    EXPECT_TRUE(ack.has_batch_ack()) << ack.DebugString();
    s.Finish();
  }
  kill(tuner, SIGTERM);
  testing::WaitExit(tuner);
  const std::string log = testing::Slurp(dir.File("tuner.err"));
  EXPECT_LT(log.size(), 64u << 10) << "the log holds a bounded excerpt";
  EXPECT_EQ(log.find("\n2026-11-30T00:00:00.000 info spintune: FORGED"), std::string::npos)
      << "a newline in the error must not start a log line";
  EXPECT_NE(log.find("refused\\n2026-11-30"), std::string::npos) << "escaped, still readable";
  auto store = Store::Open(dir.File("tuner.db"));
  ASSERT_TRUE(store.ok());
  auto t = (*store)->FindTarget("talkative");
  ASSERT_TRUE(t.ok() && t->has_value());
  EXPECT_LT((*t)->applied_error.size(), 1200u);
  EXPECT_NE((*t)->applied_error.find("more bytes]"), std::string::npos) << (*t)->applied_error;
}

// Issue #17 item 7: streams that never sent a Hello stayed open forever,
// and ~0.47 KB per closed session was never given back.
TEST_F(Hostile, StreamsThatNeverSayHelloAreEndedAndClosedSessionsAreForgotten) {
  TunerOptions o;
  o.hello_timeout = absl::Milliseconds(300);
  StartTuner(o);
  RawSession silent(server_->address(), std::chrono::seconds(10));
  const absl::Time opened = absl::Now();
  v1::TunerMessage m;
  EXPECT_FALSE(silent.ReadAny(&m)) << "the tuner ends the stream";
  const grpc::Status status = silent.Finish();
  EXPECT_EQ(status.error_code(), grpc::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_LT(absl::Now() - opened, absl::Seconds(3));
  EXPECT_EQ(server_->core()->counters().hello_timeouts, 1u);
  for (int i = 0; i < 200; ++i) {
    RawSession s(server_->address());
    s.Open(GoodHello(absl::StrCat("short-lived-", i % 5)));
    s.Finish();
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while ((server_->core()->counters().active_sessions != 0 ||
          server_->core()->counters().tracked_streams != 0) &&
         absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(server_->core()->counters().active_sessions, 0u);
  EXPECT_EQ(server_->core()->counters().tracked_streams, 0u) << "nothing kept per closed session";
}

// Issue #17 item 3: on a database with one zeroed page every batch got
// Rejected{UNAVAILABLE, retry=false}, counted as over_limit, with no error
// logged; the agent dropped all of them and exited 0. Storage failures are
// retryable, logged and counted as such, and the agent keeps its batches.
TEST_F(Hostile, AStorageReadFailureIsRetryableAndTheAgentKeepsEverything) {
  StartTuner();
  auto make_agent = [&](uint64_t samples) {
    auto source = MakeSampleSource("sim:microwatt-100mhz", 2);
    auto sink = MakePolicySink("none", {"mmc0"});
    AgentOptions o;
    o.tuner_address = server_->address();
    o.agent_id = "on-bad-disk";
    o.max_samples = samples;
    o.batch_size = 500;
    o.spool_dir = dir_.File("spool");
    o.initial_backoff = absl::Milliseconds(20);
    o.max_backoff = absl::Milliseconds(100);
    o.drain_timeout = testing::kEventDeadline;  // waits for the final table
    return std::make_unique<Agent>(o, std::move(*source), std::move(*sink));
  };
  ASSERT_TRUE(make_agent(1000)->Run().ok());
  server_->Shutdown(absl::Seconds(2));
  server_.reset();
  // Zero the page at the root of the table ingest writes each batch to.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir_.File("tuner.db").c_str(), &db), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE name = 'pending_deltas'", -1,
                                 &q, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    const int64_t page = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    std::fstream f(dir_.File("tuner.db"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((page - 1) * 4096);
    const std::string zeros(4096, '\0');
    f.write(zeros.data(), zeros.size());
  }
  StartTuner();
  auto agent = make_agent(10000);
  absl::Status result;
  std::thread run([&] { result = agent->Run(); });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (server_->core()->counters().storage_errors < 3 && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  agent->Stop();
  run.join();
  const TunerCounters c = server_->core()->counters();
  EXPECT_GE(c.storage_errors, 3u);
  EXPECT_EQ(c.batches_rejected, 0u);
  EXPECT_EQ(c.batches_over_limit, 0u);
  EXPECT_EQ(agent->stats().batches_rejected, 0u) << "nothing refused for good";
  EXPECT_EQ(agent->stats().spool_dropped_batches, 0u);
  EXPECT_TRUE(result.ok()) << "stopped with everything in the spool: " << result;
  auto spool = BatchSpool::Open(dir_.File("spool"), 64 << 20);
  ASSERT_TRUE(spool.ok());
  EXPECT_GT((*spool)->count(), 0u) << "the unstored batches are kept";
}

}  // namespace
}  // namespace spintune
