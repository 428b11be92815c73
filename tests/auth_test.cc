// Authentication and authorisation end to end: bearer tokens (wrong,
// revoked, another target's, missing, not admin), TLS and mutual TLS. Every
// refusal has the right status and writes nothing.
#include <sstream>

#include "agent/agent.h"
#include "agent/policy_sink.h"
#include "cli/commands.h"
#include "gtest/gtest.h"
#include "storage/store.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/test_certs.h"
#include "tests/testing/wait_for.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

class Auth : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(db());
    ASSERT_TRUE(store.ok());
    auto a = (*store)->AddToken("board-a", "board-a", false);
    auto revoked = (*store)->AddToken("old", "board-a", false);
    auto admin = (*store)->AddToken("ops", "", true);
    ASSERT_TRUE(a.ok() && revoked.ok() && admin.ok());
    ASSERT_TRUE((*store)->RevokeToken("old").ok());
    token_a_ = *a;
    token_revoked_ = *revoked;
    token_admin_ = *admin;
  }

  std::string db() const { return dir_.File("tuner.db"); }

  void StartTuner(bool require_tokens, ServerTls tls = {}) {
    TunerOptions o;
    o.db_path = db();
    o.require_tokens = require_tokens;
    o.tls = tls;
    auto s = TunerServer::Start("127.0.0.1:0", o);
    ASSERT_TRUE(s.ok()) << s.status();
    tuner_ = std::move(*s);
  }

  // Runs an agent for `agent_id` with `security` against the tuner.
  absl::Status RunAgent(const std::string& agent_id, const ClientSecurity& security) {
    auto source = MakeSampleSource("sim:microwatt-100mhz", 1);
    auto sink = MakePolicySink("none", {"mmc0"});
    AgentOptions o;
    o.tuner_address = "localhost:" + std::to_string(tuner_->port());
    o.agent_id = agent_id;
    o.max_samples = 2000;
    o.batch_size = 500;
    o.security = security;
    o.give_up_after = absl::Milliseconds(1500);
    o.initial_backoff = absl::Milliseconds(50);
    o.drain_timeout = testing::kEventDeadline;  // waits for the final table
    Agent agent(o, std::move(*source), std::move(*sink));
    return agent.Run();
  }

  bool Stored(const std::string& agent_id) {
    auto store = Store::Open(db());
    auto t = (*store)->FindTarget(agent_id);
    return t.ok() && t->has_value() && (*t)->total_samples > 0;
  }
  bool Known(const std::string& agent_id) {
    auto store = Store::Open(db());
    auto t = (*store)->FindTarget(agent_id);
    return t.ok() && t->has_value();
  }

  absl::Status ListTargets(const ClientSecurity& security) {
    Repository repo;
    repo.tuner = "localhost:" + std::to_string(tuner_->port());
    repo.security = security;
    std::ostringstream out;
    return RunTargets(repo, "json", out);
  }

  testing::TempDir dir_;
  std::unique_ptr<TunerServer> tuner_;
  std::string token_a_, token_revoked_, token_admin_;
};

TEST_F(Auth, TokensBindAgentsToTheirTargetAndGuardAdminCalls) {
  StartTuner(/*require_tokens=*/true);
  auto refused = [&](const std::string& agent_id, const std::string& token,
                     const std::string& why) {
    SCOPED_TRACE(why);
    ClientSecurity s;
    s.token = token;
    absl::Status st = RunAgent(agent_id, s);
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_NE(st.message().find(why), std::string::npos) << st;
    EXPECT_FALSE(Known(agent_id)) << "nothing written for a refused agent";
  };
  refused("board-a", "", "requires a bearer token");
  refused("board-a", "st_0123456789abcdef", "unknown or revoked token");
  refused("board-a", token_revoked_, "unknown or revoked token");
  refused("board-b", token_a_, "token 'board-a' is for target 'board-a', not 'board-b'");
  EXPECT_GE(tuner_->core()->counters().unauthenticated, 3u);
  EXPECT_GE(tuner_->core()->counters().permission_denied, 1u);

  ClientSecurity good;
  good.token = token_a_;
  ASSERT_TRUE(RunAgent("board-a", good).ok());
  EXPECT_TRUE(Stored("board-a"));
  ClientSecurity admin;
  admin.token = token_admin_;
  ASSERT_TRUE(RunAgent("board-c", admin).ok()) << "an admin token may report for any target";

  EXPECT_EQ(ListTargets({}).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ListTargets(good).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(ListTargets(admin).ok());
  Repository repo;
  repo.tuner = "localhost:" + std::to_string(tuner_->port());
  repo.security = good;
  std::ostringstream out;
  EXPECT_EQ(RunPolicy(repo, "board-a", 0, "json", false, out).code(),
            absl::StatusCode::kPermissionDenied)
      << "an agent token cannot read tables, its own neither";
}

TEST_F(Auth, WithoutRequireTokensEverythingIsOpen) {
  StartTuner(/*require_tokens=*/false);
  EXPECT_TRUE(RunAgent("board-z", {}).ok());
  EXPECT_TRUE(ListTargets({}).ok());
}

TEST_F(Auth, TlsAndMutualTls) {
  testing::TestCerts c;
  ASSERT_TRUE(testing::MakeTestCerts(dir_.path().string(), &c))
      << testing::Slurp(dir_.File("openssl.log"));
  StartTuner(false, {c.server_cert, c.server_key, ""});
  ClientSecurity tls;
  tls.ca = c.ca;
  EXPECT_TRUE(RunAgent("tls-ok", tls).ok());
  EXPECT_TRUE(Stored("tls-ok"));
  EXPECT_EQ(RunAgent("plaintext", {}).code(), absl::StatusCode::kDeadlineExceeded)
      << "a plaintext client cannot talk to a TLS tuner";
  EXPECT_FALSE(Known("plaintext"));
  ClientSecurity wrong_ca;
  wrong_ca.ca = c.other_ca;
  EXPECT_EQ(RunAgent("wrong-ca", wrong_ca).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(Known("wrong-ca"));
  EXPECT_TRUE(ListTargets(tls).ok());
  tuner_.reset();

  StartTuner(false, {c.server_cert, c.server_key, c.ca});
  EXPECT_EQ(RunAgent("no-cert", tls).code(), absl::StatusCode::kDeadlineExceeded)
      << "mutual TLS: a client without a certificate is refused";
  EXPECT_FALSE(Known("no-cert"));
  ClientSecurity rogue = tls;
  rogue.cert = c.rogue_cert;
  rogue.key = c.rogue_key;
  EXPECT_EQ(RunAgent("rogue", rogue).code(), absl::StatusCode::kDeadlineExceeded)
      << "a certificate from another CA is refused";
  EXPECT_FALSE(Known("rogue"));
  ClientSecurity mtls = tls;
  mtls.cert = c.client_cert;
  mtls.key = c.client_key;
  EXPECT_TRUE(RunAgent("mtls-ok", mtls).ok());
  EXPECT_TRUE(Stored("mtls-ok"));
}

TEST_F(Auth, BadCredentialFilesAreClearErrors) {
  TunerOptions o;
  o.db_path = db();
  o.tls = {dir_.File("missing.pem"), dir_.File("missing.key"), ""};
  auto s = TunerServer::Start("127.0.0.1:0", o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--tls-cert"), std::string::npos) << s.status();
  o.tls = {"", "", "ca.pem"};
  EXPECT_EQ(TunerServer::Start("127.0.0.1:0", o).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ReadTokenFile(dir_.File("none")).ok());
}

}  // namespace
}  // namespace spintune
