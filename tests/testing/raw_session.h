// Test helpers for the tuner's wire: a Session stream driven by hand (a raw
// or hostile client); the messages are in wire_messages.h.
#ifndef SPINTUNE_TESTS_TESTING_RAW_SESSION_H_
#define SPINTUNE_TESTS_TESTING_RAW_SESSION_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "spintune/v1/spintune.grpc.pb.h"
#include "tests/testing/wire_messages.h"

namespace spintune::testing {

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
