// spintune-loadgen against a real tuner, bounded: 40 agents in one process,
// every sample stored exactly once per target.
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/store.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

TEST(Load, FortyAgentsInOneProcessAreStoredExactly) {
  testing::TempDir dir;
  TunerOptions o;
  o.db_path = dir.File("tuner.db");
  auto tuner = TunerServer::Start("127.0.0.1:0", o);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  auto r = testing::Run({SPINTUNE_LOADGEN_BIN, "--tuner", (*tuner)->address(), "--agents", "40",
                         "--samples-per-agent", "3000", "--batch-size", "250", "--format", "json"},
                        dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"samples_stored\": 120000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"ack_p99_ms\""), std::string::npos);
  (*tuner)->Shutdown(absl::Seconds(2));
  auto store = Store::Open(o.db_path);
  ASSERT_TRUE(store.ok());
  auto targets = (*store)->ListTargets();
  ASSERT_TRUE(targets.ok());
  ASSERT_EQ(targets->size(), 40u);
  for (const auto& t : *targets) {
    EXPECT_EQ(t.total_samples, 3000u) << t.agent_id;
    EXPECT_EQ(*(*store)->LastDurableSeq(t.id), 12u) << t.agent_id;
  }
}

}  // namespace
}  // namespace spintune
