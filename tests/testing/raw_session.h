// Test helpers for the tuner's wire: a Session stream driven by hand (a raw
// or hostile client) and well-formed Hello and batch messages.
#ifndef SPINTUNE_TESTS_TESTING_RAW_SESSION_H_
#define SPINTUNE_TESTS_TESTING_RAW_SESSION_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "spintune/v1/spintune.grpc.pb.h"

namespace spintune::testing {

inline v1::Hello GoodHello(const std::string& agent_id) {
  v1::Hello h;
  h.set_agent_id(agent_id);
  h.mutable_target()->set_board("test-board");
  auto* c = h.mutable_target()->add_cpu_classes();
  c->set_name("cpu");
  c->set_cpu_khz(1'000'000);
  c->mutable_costs()->set_irq_cpu_ns(20'000);
  c->mutable_costs()->set_irq_wake_ns(30'000);
  c->mutable_costs()->set_poll_read_ns(100);
  c->mutable_costs()->set_timer_cpu_ns(2'000);
  c->mutable_costs()->set_timer_wake_ns(50'000);
  auto* d = h.add_devices();
  d->set_name("mmc0");
  d->set_driver("litex-mmc");
  return h;
}

inline v1::SampleBatch GoodBatch(uint64_t seq, int n, uint32_t opcodes = 1) {
  v1::SampleBatch b;
  b.set_seq(seq);
  auto* c = b.mutable_completions();
  for (int i = 0; i < n; ++i) {
    c->add_device_index(0);
    c->add_cpu_class_index(0);
    c->add_opcode(17 + static_cast<uint32_t>(i) % opcodes);
    c->add_bytes(512);
    c->add_wait_ns(10'000 + static_cast<uint64_t>(i));
    c->add_path(v1::WAIT_PATH_SPIN);
    c->add_flags(0);
  }
  auto* d = b.mutable_dispatches();
  d->add_cpu_class_index(0);
  d->add_device_index(0);
  d->add_handler_ns(3'000);
  d->add_wake_ns(20'000);
  return b;
}

// A Session stream driven by hand.
class RawSession {
 public:
  explicit RawSession(const std::string& address,
                      std::chrono::seconds deadline = std::chrono::seconds(30))
      : stub_(v1::Tuner::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    ctx_.set_deadline(std::chrono::system_clock::now() + deadline);
    stream_ = stub_->Session(&ctx_);
  }
  bool Send(const v1::AgentMessage& m) { return stream_->Write(m); }
  bool SendHello(const v1::Hello& h) {
    v1::AgentMessage m;
    *m.mutable_hello() = h;
    return Send(m);
  }
  bool SendBatch(const v1::SampleBatch& b) {
    v1::AgentMessage m;
    *m.mutable_batch() = b;
    return Send(m);
  }
  // The next message that is not a policy push.
  bool Read(v1::TunerMessage* out) {
    while (stream_->Read(out)) {
      if (!out->has_policy()) return true;
    }
    return false;
  }
  grpc::Status Finish() {
    stream_->WritesDone();
    v1::TunerMessage ignored;
    while (stream_->Read(&ignored)) {
    }
    return stream_->Finish();
  }
  // Any next message, policy pushes included.
  bool ReadAny(v1::TunerMessage* out) { return stream_->Read(out); }
  // Ends the call from this side (the tuner sees a cancellation).
  void Cancel() { ctx_.TryCancel(); }
  // Hello, then its ack.
  void Open(const v1::Hello& h) {
    ASSERT_TRUE(SendHello(h));
    v1::TunerMessage ack;
    ASSERT_TRUE(Read(&ack));
    ASSERT_TRUE(ack.has_hello_ack()) << ack.DebugString();
  }

 private:
  std::unique_ptr<v1::Tuner::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::TunerMessage>> stream_;
};

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_RAW_SESSION_H_
