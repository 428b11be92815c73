// The tuner binary as operators see it: the gRPC health service, server
// reflection, and the Prometheus endpoint scraped with curl while a real
// agent streams (the counters move), plus log lines with levels.
#include <signal.h>

#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

class Observability : public ::testing::Test {
 protected:
  void SetUp() override {
    tuner_ = testing::Spawn({SPINTUNE_TUNER_BIN, "--listen", "127.0.0.1:0", "--db",
                             dir_.File("tuner.db"), "--metrics-listen", "127.0.0.1:0",
                             "--refit-samples", "2000", "--min-refit-interval", "0"},
                            dir_.File("tuner.out"), dir_.File("tuner.err"));
    address_ = testing::WaitForLine(dir_.File("tuner.out"), "listening on ");
    metrics_url_ = testing::WaitForLine(dir_.File("tuner.out"), "metrics on ");
    ASSERT_FALSE(metrics_url_.empty()) << testing::Slurp(dir_.File("tuner.err"));
    channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    // gRPC's health and reflection services are synchronous: a client that
    // keeps its channel open after calling them holds the tuner's shutdown
    // for the full --shutdown-deadline. Close it first, as probes do.
    channel_.reset();
    if (tuner_ > 0) {
      kill(tuner_, SIGTERM);
      EXPECT_EQ(testing::WaitExit(tuner_), 0);
    }
  }

  // The scraped samples, by series ("name" or "name{labels}").
  std::map<std::string, double> Scrape(const std::string& url) {
    auto r = testing::Run({"/usr/bin/curl", "-sf", "--max-time", "10", url}, dir_.path().string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, double> m;
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.rfind(' ');
      double v = 0;
      EXPECT_TRUE(absl::SimpleAtod(line.substr(space + 1), &v)) << line;
      m[line.substr(0, space)] = v;
    }
    return m;
  }

  grpc::health::v1::HealthCheckResponse::ServingStatus Health(const std::string& service,
                                                              grpc::StatusCode* code) {
    auto stub = grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    *code = stub->Check(&ctx, req, &resp).error_code();
    return resp.status();
  }

  testing::TempDir dir_;
  pid_t tuner_ = -1;
  std::string address_, metrics_url_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(Observability, HealthAndReflection) {
  grpc::StatusCode code;
  EXPECT_EQ(Health("", &code), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(code, grpc::StatusCode::OK);
  EXPECT_EQ(Health("spintune.v1.Tuner", &code), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(code, grpc::StatusCode::OK);
  Health("no.such.Service", &code);
  EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND);

  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  auto stream = stub->ServerReflectionInfo(&ctx);
  grpc::reflection::v1alpha::ServerReflectionRequest req;
  req.set_list_services("");
  ASSERT_TRUE(stream->Write(req));
  stream->WritesDone();
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  std::vector<std::string> names;
  for (const auto& s : resp.list_services_response().service()) names.push_back(s.name());
  EXPECT_NE(std::find(names.begin(), names.end(), "spintune.v1.Tuner"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "grpc.health.v1.Health"), names.end());
  while (stream->Read(&resp)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(Observability, MetricsMoveWhileAnAgentStreams) {
  auto before = Scrape(metrics_url_);
  EXPECT_EQ(before["spintune_tuner_samples_ingested_total"], 0);
  EXPECT_EQ(before["spintune_tuner_sessions_active"], 0);
  EXPECT_EQ(before.count("spintune_tuner_rejected_total{reason=\"invalid\"}"), 1u);
  EXPECT_EQ(before["spintune_tuner_ingest_latency_seconds_bucket{le=\"+Inf\"}"], 0);

  // A board measuring in real time for about two seconds.
  const pid_t agent = testing::Spawn(
      {SPINTUNE_AGENT_BIN, "--tuner", address_, "--source", "sim:microwatt-100mhz", "--rate",
       "15000", "--max-samples", "30000", "--batch-size", "500", "--state-dir",
       dir_.File("state")},
      dir_.File("agent.out"), dir_.File("agent.err"));
  std::map<std::string, double> during;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    during = Scrape(metrics_url_);
    if (during["spintune_tuner_samples_ingested_total"] > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(during["spintune_tuner_samples_ingested_total"], 0);
  EXPECT_LT(during["spintune_tuner_samples_ingested_total"], 30000) << "scraped mid-stream";
  EXPECT_EQ(during["spintune_tuner_sessions_active"], 1);
  EXPECT_EQ(during["spintune_tuner_sessions_total"], 1);
  ASSERT_EQ(testing::WaitExit(agent), 0) << testing::Slurp(dir_.File("agent.err"));

  std::map<std::string, double> after;
  const absl::Time settle = absl::Now() + absl::Seconds(10);
  do {
    after = Scrape(metrics_url_);
  } while (after["spintune_tuner_sessions_active"] != 0 && absl::Now() < settle);
  EXPECT_EQ(after["spintune_tuner_samples_ingested_total"], 30000);
  EXPECT_EQ(after["spintune_tuner_batches_ingested_total"], 60);
  EXPECT_EQ(after["spintune_tuner_sessions_active"], 0);
  EXPECT_GT(after["spintune_tuner_refits_total"], during["spintune_tuner_refits_total"]);
  EXPECT_GE(after["spintune_tuner_policy_versions_total"], 1);
  EXPECT_GE(after["spintune_tuner_pushes_total"], 1);
  EXPECT_EQ(after["spintune_tuner_ingest_latency_seconds_count"], 60);
  EXPECT_EQ(after["spintune_tuner_ingest_latency_seconds_bucket{le=\"+Inf\"}"], 60);
  EXPECT_GT(after["spintune_tuner_ingest_latency_seconds_sum"], 0);
  // The ingest worker's commits held the write turn; the background lines
  // are there (a compaction or refit may not have written yet).
  EXPECT_GT(after["spintune_tuner_write_gate_held_seconds_total{writer=\"ingest\"}"], 0);
  EXPECT_EQ(after.count("spintune_tuner_write_gate_held_seconds_total{writer=\"background\"}"),
            1u);
  EXPECT_EQ(after.count("spintune_tuner_write_gate_wait_seconds_total"), 1u);
  EXPECT_EQ(after.count("spintune_tuner_write_gate_longest_background_seconds"), 1u);

  auto other = testing::Run({"/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                             metrics_url_.substr(0, metrics_url_.rfind('/')) + "/other"},
                            dir_.path().string());
  EXPECT_EQ(other.out, "404");
  // Log lines carry a level and the component.
  const std::string log = testing::Slurp(dir_.File("tuner.err"));
  EXPECT_NE(log.find(" info tuner: session agent="), std::string::npos) << log;
}

TEST_F(Observability, BadMetricsAddressIsAUsageError) {
  auto r = testing::Run({SPINTUNE_TUNER_BIN, "--listen", "127.0.0.1:0", "--db",
                         dir_.File("other.db"), "--metrics-listen", "localhost"},
                        dir_.path().string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--metrics-listen: 'localhost' is not IPv4 HOST:PORT"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace spintune
