// Every validation rule at the boundary: a real tuner on loopback, a raw
// Session stream sending one bad value, the status naming the field, and the
// same stream (for batches) and another agent carrying on unaffected.
#include <grpcpp/grpcpp.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "spintune/v1/spintune.grpc.pb.h"
#include "storage/store.h"
#include "tests/testing/raw_session.h"
#include "tests/testing/temp_dir.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

using testing::GoodBatch;
using testing::GoodHello;
using testing::RawSession;

class Validation : public ::testing::Test {
 protected:
  void StartTuner(TunerOptions options = {}) {
    options.db_path = dir_.File("tuner.db");
    options.refit_samples = 1'000'000;  // no refits: only ingest matters here
    auto s = TunerServer::Start("127.0.0.1:0", options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  void SetUp() override { StartTuner(); }

  // A second agent that must not notice anything: one good batch, acked.
  void OtherAgentStillServed() {
    RawSession other(server_->address());
    other.Open(GoodHello("bystander"));
    ASSERT_TRUE(other.SendBatch(GoodBatch(++bystander_seq_, 10)));
    v1::TunerMessage m;
    ASSERT_TRUE(other.Read(&m));
    EXPECT_TRUE(m.has_batch_ack()) << m.DebugString();
    EXPECT_TRUE(other.Finish().ok());
  }

  uint64_t StoredSamples(const std::string& agent_id) {
    auto store = Store::Open(dir_.File("tuner.db"));
    EXPECT_TRUE(store.ok());
    auto t = (*store)->FindTarget(agent_id);
    return t.ok() && t->has_value() ? (*t)->total_samples : 0;
  }

  testing::TempDir dir_;
  std::unique_ptr<TunerServer> server_;
  uint64_t bystander_seq_ = 0;
};

struct BatchRule {
  std::string name;
  std::function<void(v1::SampleBatch*)> corrupt;
  grpc::StatusCode code;
  std::string field;
};

TEST_F(Validation, EveryBatchRuleRefusesNamesTheFieldAndTheStreamGoesOn) {
  const std::vector<BatchRule> rules = {
      {"seq 0", [](v1::SampleBatch* b) { b->set_seq(0); }, grpc::INVALID_ARGUMENT, "batch.seq"},
      {"ragged columns", [](v1::SampleBatch* b) { b->mutable_completions()->add_opcode(1); },
       grpc::INVALID_ARGUMENT, "completions: columns"},
      {"device index", [](v1::SampleBatch* b) { b->mutable_completions()->set_device_index(3, 7); },
       grpc::INVALID_ARGUMENT, "completions.device_index[3]"},
      {"cpu class index",
       [](v1::SampleBatch* b) { b->mutable_completions()->set_cpu_class_index(0, 1); },
       grpc::INVALID_ARGUMENT, "completions.cpu_class_index[0]"},
      {"reserved opcode",
       [](v1::SampleBatch* b) { b->mutable_completions()->set_opcode(2, 0xFFFFFFFFu); },
       grpc::INVALID_ARGUMENT, "completions.opcode[2]"},
      {"absurd wait",
       [](v1::SampleBatch* b) { b->mutable_completions()->set_wait_ns(4, ~uint64_t{0}); },
       grpc::INVALID_ARGUMENT, "completions.wait_ns[4]"},
      {"unknown path enum",
       [](v1::SampleBatch* b) {
         b->mutable_completions()->set_path(1, static_cast<v1::WaitPath>(9));
       },
       grpc::INVALID_ARGUMENT, "completions.path[1]"},
      {"unknown flags", [](v1::SampleBatch* b) { b->mutable_completions()->set_flags(5, 8); },
       grpc::INVALID_ARGUMENT, "completions.flags[5]"},
      {"oversized batch",
       [](v1::SampleBatch* b) {
         auto* c = b->mutable_completions();
         for (int i = 0; i < 65537; ++i) {
           c->add_device_index(0);
           c->add_cpu_class_index(0);
           c->add_opcode(17);
           c->add_bytes(0);
           c->add_wait_ns(1);
           c->add_path(v1::WAIT_PATH_SPIN);
           c->add_flags(0);
         }
       },
       grpc::INVALID_ARGUMENT, "completions: 65547 samples"},
      {"ragged dispatch", [](v1::SampleBatch* b) { b->mutable_dispatches()->add_wake_ns(1); },
       grpc::INVALID_ARGUMENT, "dispatches: columns"},
      {"dispatch device",
       [](v1::SampleBatch* b) { b->mutable_dispatches()->set_device_index(0, 2); },
       grpc::INVALID_ARGUMENT, "dispatches.device_index[0]"},
      {"placeholder with samples",
       [](v1::SampleBatch* b) { b->mutable_dropped()->set_last_seq(b->seq()); },
       grpc::INVALID_ARGUMENT, "dropped: a placeholder carries no samples"},
      {"placeholder range",
       [](v1::SampleBatch* b) {
         const uint64_t seq = b->seq();
         b->Clear();
         b->set_seq(seq);
         b->mutable_dropped()->set_last_seq(seq - 1);
       },
       grpc::INVALID_ARGUMENT, "dropped.last_seq"},
      {"placeholder samples",
       [](v1::SampleBatch* b) {
         const uint64_t seq = b->seq();
         b->Clear();
         b->set_seq(seq);
         b->mutable_dropped()->set_last_seq(seq + 1);
         b->mutable_dropped()->set_samples(3 * 65536);
       },
       grpc::INVALID_ARGUMENT, "dropped.samples"},
      {"dispatch cpu class",
       [](v1::SampleBatch* b) { b->mutable_dispatches()->set_cpu_class_index(0, 9); },
       grpc::INVALID_ARGUMENT, "dispatches.cpu_class_index[0]"},
      {"absurd handler time",
       [](v1::SampleBatch* b) { b->mutable_dispatches()->set_handler_ns(0, ~uint64_t{0} / 2); },
       grpc::INVALID_ARGUMENT, "dispatches[0]"},
  };
  RawSession s(server_->address());
  s.Open(GoodHello("agent-1"));
  uint64_t seq = 0, good = 0;
  for (const auto& rule : rules) {
    SCOPED_TRACE(rule.name);
    v1::SampleBatch bad = GoodBatch(++seq, 10);
    rule.corrupt(&bad);
    ASSERT_TRUE(s.SendBatch(bad));
    v1::TunerMessage m;
    ASSERT_TRUE(s.Read(&m));
    ASSERT_TRUE(m.has_rejected()) << m.DebugString();
    EXPECT_EQ(m.rejected().code(), rule.code);
    EXPECT_NE(m.rejected().message().find(rule.field), std::string::npos) << m.rejected().message();
    EXPECT_FALSE(m.rejected().retry()) << "bad content is never resent";
    // The same stream carries on: a refused batch used its seq up (seq 0 has
    // none to use).
    if (bad.seq() == 0) --seq;
    ASSERT_TRUE(s.SendBatch(GoodBatch(++seq, 10)));
    ASSERT_TRUE(s.Read(&m));
    EXPECT_TRUE(m.has_batch_ack()) << m.DebugString();
    good += 10;
    OtherAgentStillServed();
  }
  EXPECT_TRUE(s.Finish().ok());
  EXPECT_EQ(StoredSamples("agent-1"), good) << "nothing of a refused batch is stored";
}

struct HelloRule {
  std::string name;
  std::function<void(v1::Hello*)> corrupt;
  std::string field;
};

TEST_F(Validation, EveryHelloRuleEndsThatStreamOnlyNamingTheField) {
  auto costs = [](v1::Hello* h) { return h->mutable_target()->mutable_cpu_classes(0)->mutable_costs(); };
  const std::vector<HelloRule> rules = {
      {"empty agent id", [](v1::Hello* h) { h->clear_agent_id(); }, "hello.agent_id"},
      {"long agent id", [](v1::Hello* h) { h->set_agent_id(std::string(300, 'a')); },
       "hello.agent_id"},
      {"control characters", [](v1::Hello* h) { h->set_agent_id("a\nb"); }, "hello.agent_id"},
      {"empty board", [](v1::Hello* h) { h->mutable_target()->clear_board(); }, "hello.target.board"},
      {"long cpu model",
       [](v1::Hello* h) { h->mutable_target()->set_cpu_model(std::string(300, 'x')); },
       "hello.target.cpu_model"},
      {"control characters in the kernel release",
       [](v1::Hello* h) { h->mutable_target()->set_kernel_release("6.1\n[forged]"); },
       "hello.target.kernel_release"},
      {"long rule note",
       [](v1::Hello* h) {
         auto* rule = h->mutable_devices(0)->add_default_rules();
         rule->set_strategy(v1::STRATEGY_IRQ);
         rule->set_note(std::string(8 << 20, 'n'));
       },
       "hello.devices[0].default_rules[0].note"},
      {"no cpu class", [](v1::Hello* h) { h->mutable_target()->clear_cpu_classes(); },
       "hello.target.cpu_classes"},
      {"too many cpu classes",
       [](v1::Hello* h) {
         for (int i = 0; i < 70; ++i) {
           auto* c = h->mutable_target()->add_cpu_classes();
           *c = h->target().cpu_classes(0);
           c->set_name("c" + std::to_string(i));
         }
       },
       "hello.target.cpu_classes"},
      {"reserved class name",
       [](v1::Hello* h) { h->mutable_target()->mutable_cpu_classes(0)->set_name("*"); },
       "hello.target.cpu_classes[0].name"},
      {"duplicate class",
       [](v1::Hello* h) {
         *h->mutable_target()->add_cpu_classes() = h->target().cpu_classes(0);
       },
       "hello.target.cpu_classes[1].name"},
      {"absurd clock",
       [](v1::Hello* h) { h->mutable_target()->mutable_cpu_classes(0)->set_cpu_khz(~uint64_t{0}); },
       "hello.target.cpu_classes[0].cpu_khz"},
      {"absurd irq cost", [&](v1::Hello* h) { costs(h)->set_irq_cpu_ns(~uint64_t{0}); },
       "hello.target.cpu_classes[0].costs"},
      {"overhead above irq cost", [&](v1::Hello* h) { costs(h)->set_irq_overhead_cpu_ns(30'000); },
       "hello.target.cpu_classes[0].costs.irq_overhead_cpu_ns"},
      {"no device", [](v1::Hello* h) { h->clear_devices(); }, "hello.devices"},
      {"too many devices",
       [](v1::Hello* h) {
         for (int i = 0; i < 70; ++i) h->add_devices()->set_name("d" + std::to_string(i));
       },
       "hello.devices"},
      {"long device name", [](v1::Hello* h) { h->mutable_devices(0)->set_name(std::string(40, 'd')); },
       "hello.devices[0].name"},
      {"duplicate device", [](v1::Hello* h) { *h->add_devices() = h->devices(0); },
       "hello.devices[1].name"},
      {"unknown strategy enum",
       [](v1::Hello* h) {
         h->mutable_devices(0)->add_default_rules()->set_strategy(static_cast<v1::Strategy>(42));
       },
       "hello.devices[0].default_rules[0]"},
  };
  for (const auto& rule : rules) {
    SCOPED_TRACE(rule.name);
    v1::Hello h = GoodHello("bad-hello");
    rule.corrupt(&h);
    RawSession s(server_->address());
    ASSERT_TRUE(s.SendHello(h));
    v1::TunerMessage m;
    EXPECT_FALSE(s.Read(&m)) << "no ack for a bad hello";
    const grpc::Status st = s.Finish();
    EXPECT_EQ(st.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find(rule.field), std::string::npos) << st.error_message();
    OtherAgentStillServed();
  }
  EXPECT_EQ(StoredSamples("bad-hello"), 0u);
}

TEST_F(Validation, ProtocolOrderIsEnforced) {
  {
    RawSession s(server_->address());
    ASSERT_TRUE(s.SendBatch(GoodBatch(1, 5)));
    EXPECT_EQ(s.Finish().error_code(), grpc::FAILED_PRECONDITION);
  }
  {
    RawSession s(server_->address());
    s.Open(GoodHello("twice"));
    ASSERT_TRUE(s.SendHello(GoodHello("twice")));
    EXPECT_EQ(s.Finish().error_code(), grpc::FAILED_PRECONDITION);
  }
  {
    RawSession s(server_->address());
    ASSERT_TRUE(s.Send(v1::AgentMessage()));
    EXPECT_EQ(s.Finish().error_code(), grpc::INVALID_ARGUMENT);
  }
  OtherAgentStillServed();
}

TEST_F(Validation, KeyCardinalityLimit) {
  TunerOptions o;
  o.max_keys_per_target = 3;
  server_.reset();
  StartTuner(o);
  RawSession s(server_->address());
  s.Open(GoodHello("many-keys"));
  ASSERT_TRUE(s.SendBatch(GoodBatch(1, 20, /*opcodes=*/4)));
  v1::TunerMessage m;
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_rejected());
  EXPECT_EQ(m.rejected().code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_NE(m.rejected().message().find("--max-keys-per-target"), std::string::npos);
  EXPECT_FALSE(m.rejected().retry());
  ASSERT_TRUE(s.SendBatch(GoodBatch(2, 20, /*opcodes=*/3)));
  ASSERT_TRUE(s.Read(&m));
  EXPECT_TRUE(m.has_batch_ack());
  ASSERT_TRUE(s.SendBatch(GoodBatch(3, 5, /*opcodes=*/1)));  // known keys only
  ASSERT_TRUE(s.Read(&m));
  EXPECT_TRUE(m.has_batch_ack());
  EXPECT_TRUE(s.Finish().ok());
  OtherAgentStillServed();
  EXPECT_EQ(StoredSamples("many-keys"), 25u);
}

// Two tuners on one database: an agent that moved to the other tuner and
// back brings the keys it added there into this tuner's count.
TEST_F(Validation, KeyLimitCountsKeysAnotherTunerStored) {
  TunerOptions o;
  o.max_keys_per_target = 3;
  server_.reset();
  StartTuner(o);
  TunerOptions other_options = o;
  other_options.db_path = dir_.File("tuner.db");
  other_options.refit_samples = 1'000'000;
  auto other = TunerServer::Start("127.0.0.1:0", other_options);
  ASSERT_TRUE(other.ok()) << other.status();
  // A batch of one sample per opcode in `opcodes`.
  auto batch = [](uint64_t seq, std::vector<uint32_t> opcodes) {
    v1::SampleBatch b = GoodBatch(seq, static_cast<int>(opcodes.size()));
    for (size_t i = 0; i < opcodes.size(); ++i) {
      b.mutable_completions()->set_opcode(static_cast<int>(i), opcodes[i]);
    }
    return b;
  };
  auto send = [](RawSession& s, const v1::SampleBatch& b) {
    v1::TunerMessage m;
    EXPECT_TRUE(s.SendBatch(b));
    EXPECT_TRUE(s.Read(&m));
    return m;
  };
  {
    RawSession here(server_->address());
    here.Open(GoodHello("mover"));
    EXPECT_TRUE(send(here, batch(1, {17})).has_batch_ack());  // this tuner knows 1 key
    EXPECT_TRUE(here.Finish().ok());
  }
  {
    RawSession there((*other)->address());
    there.Open(GoodHello("mover"));
    EXPECT_TRUE(send(there, batch(2, {18, 19})).has_batch_ack());  // 3 keys: the limit
    EXPECT_TRUE(there.Finish().ok());
  }
  RawSession back(server_->address());
  back.Open(GoodHello("mover"));
  v1::TunerMessage m = send(back, batch(3, {20}));
  ASSERT_TRUE(m.has_rejected()) << "a 4th key: " << m.DebugString();
  EXPECT_EQ(m.rejected().code(), grpc::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(back.Finish().ok());
  EXPECT_EQ(StoredSamples("mover"), 3u);
}

TEST_F(Validation, PerAgentRateLimitDefersAndTheBatchIsTakenLater) {
  TunerOptions o;
  o.max_agent_samples_per_second = 1000;  // burst: 2000
  server_.reset();
  StartTuner(o);
  {
    RawSession s(server_->address());
    s.Open(GoodHello("fast"));
    v1::TunerMessage m;
    ASSERT_TRUE(s.SendBatch(GoodBatch(1, 1500)));
    ASSERT_TRUE(s.Read(&m));
    EXPECT_TRUE(m.has_batch_ack());
    ASSERT_TRUE(s.SendBatch(GoodBatch(2, 1500)));
    ASSERT_TRUE(s.Read(&m));
    ASSERT_TRUE(m.has_rejected()) << m.DebugString();
    EXPECT_EQ(m.rejected().code(), grpc::RESOURCE_EXHAUSTED);
    EXPECT_NE(m.rejected().message().find("--max-agent-samples-per-second"), std::string::npos);
    EXPECT_TRUE(m.rejected().retry());
    // Everything after it on this stream is deferred too: no gap in seqs.
    ASSERT_TRUE(s.SendBatch(GoodBatch(3, 1)));
    ASSERT_TRUE(s.Read(&m));
    ASSERT_TRUE(m.has_rejected());
    EXPECT_TRUE(m.rejected().retry());
    EXPECT_TRUE(s.Finish().ok());
  }
  OtherAgentStillServed();  // its own budget
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  RawSession again(server_->address());
  v1::TunerMessage m;
  ASSERT_TRUE(again.SendHello(GoodHello("fast")));
  ASSERT_TRUE(again.Read(&m));
  EXPECT_EQ(m.hello_ack().last_durable_seq(), 1u);
  ASSERT_TRUE(again.SendBatch(GoodBatch(2, 1500)));
  ASSERT_TRUE(again.Read(&m));
  EXPECT_TRUE(m.has_batch_ack()) << m.DebugString();
  EXPECT_TRUE(again.Finish().ok());
  EXPECT_EQ(StoredSamples("fast"), 3000u);
}

TEST_F(Validation, OversizedMessageEndsOnlyThatStream) {
  TunerOptions o;
  o.max_message_bytes = 64 << 10;
  server_.reset();
  StartTuner(o);
  RawSession s(server_->address());
  s.Open(GoodHello("huge"));
  s.SendBatch(GoodBatch(1, 20000));  // ~300 KB
  const grpc::Status st = s.Finish();
  EXPECT_EQ(st.error_code(), grpc::RESOURCE_EXHAUSTED) << st.error_message();
  OtherAgentStillServed();
  EXPECT_EQ(StoredSamples("huge"), 0u);
}

}  // namespace
}  // namespace spintune
