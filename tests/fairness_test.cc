// Issue #17 item 4: one client must not stall every other agent. Each test
// runs spintune-fairness-bench (a real tuner process, hostile clients and a
// bystander agent) on a small flood and checks that the bystander is served
// and the tuner's memory stays bounded. The bounds are generous (the figures
// for docs/benchmarks.md come from the bench itself); the floods used to
// stall the bystander for seconds (Drains: 27 s, Hellos on a large
// database: 3.2 s each) or grow the tuner to 819 MB.
#include <regex>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

nlohmann::json RunBench(const std::vector<std::string>& args) {
  testing::TempDir dir;
  std::vector<std::string> argv = {SPINTUNE_FAIRNESS_BENCH_BIN, "--format", "json"};
  argv.insert(argv.end(), args.begin(), args.end());
  testing::RunResult r = testing::Run(argv, dir.path().string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
  return j;
}

void ExpectBystanderServed(const nlohmann::json& j, double max_ms) {
  SCOPED_TRACE(j.dump(2));
  EXPECT_EQ(j["failures"], 0);
  EXPECT_GT(j["hostile_messages"].get<int>(), 0) << "the flood must have happened";
  EXPECT_LT(j["hello_ms"]["max"].get<double>(), max_ms);
  EXPECT_LT(j["first_ack_ms"]["max"].get<double>(), max_ms);
  EXPECT_EQ(j["tuner_exit_code"], 0);
  EXPECT_LT(j["shutdown_s"].get<double>(), 5 + 3) << "SIGTERM meets --shutdown-deadline 5";
}

TEST(Fairness, ADrainFloodDoesNotStallOtherAgents) {
  ExpectBystanderServed(RunBench({"--scenario", "drains", "--flood", "200", "--bystanders", "20"}),
                        1000);
}

TEST(Fairness, AHelloCostsTheSameWhateverTheDatabaseHolds) {
  ExpectBystanderServed(RunBench({"--scenario", "hellos", "--flood", "100", "--bystanders", "20",
                                  "--stored-targets", "10", "--stored-keys", "2048"}),
                        1000);
}

TEST(Fairness, UnacknowledgedOversizedBatchesStayWithinTheMemoryBound) {
  const nlohmann::json j = RunBench({"--scenario", "oversized", "--flood", "100", "--bystanders",
                                     "20", "--max-queued-mb", "32"});
  ExpectBystanderServed(j, 2000);
  // 32 MiB of queued batches, the stream windows, gRPC's buffers and the
  // tuner itself (about 25 MiB idle), and the copies of each message being
  // read (docs/reliability.md). Peaks measured on this VM: 40-87 MiB since
  // compaction folds staged batches one at a time (50-132, bimodal, when it
  // decoded all of a target's staged batches at once: 52 MiB for this flood
  // by heaptrack).
  EXPECT_LT(j["tuner_peak_rss_mb"].get<double>(), 160) << j.dump(2);
}

// --grpc-memory-mb bounds what gRPC holds for streams whose reads wait (a
// fleet of 10,000 behind storage for 150 s: 2.7 GB without it, 1.2 GB at
// 512 MiB; docs/benchmarks.md). Near its quota gRPC shrinks windows and stops taking
// new connections: even with a quota far below what a flood sends, the
// other agents still connect and are served.
TEST(Fairness, AGrpcMemoryQuotaStillServesOtherAgentsDuringAFlood) {
  const nlohmann::json j = RunBench({"--scenario", "oversized", "--flood", "100", "--bystanders",
                                     "20", "--max-queued-mb", "32", "--grpc-memory-mb", "16"});
  ExpectBystanderServed(j, 2000);
  EXPECT_EQ(j["grpc_memory_mb"], 16) << "the quota was passed on";
  EXPECT_LT(j["tuner_peak_rss_mb"].get<double>(), 160) << j.dump(2);
}

}  // namespace
}  // namespace spintune
