// spintune-null-tuner: gRPC's own cost of a fleet, without the tuner.
//
// Serves Tuner.Session and nothing else: a Hello is answered with a HelloAck
// (resume at seq 0, histogram bytes accepted), a batch with the BatchAck of
// its seq, anything else ignored. Nothing is parsed beyond the seq, decoded,
// stored or fitted. Run spintune-loadgen --fleet against it and the CPU per
// batch on both sides is the floor that gRPC alone puts under any tuner on
// the same machine (tools/ingest_bench.sh --null, docs/benchmarks.md).
//
//   spintune-null-tuner --listen 127.0.0.1:0 --api callback
//   spintune-null-tuner --listen 127.0.0.1:0 --api async --threads 2
//
// --api callback: one ServerGenericBidiReactor per stream, as the tuner's
// service (tuner/tuner_service.cc). --api async: the completion-queue API,
// one queue per thread, each stream's reads and writes on the queue it
// arrived on.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/process_setup.h"
#include "common/signal_waiter.h"
#include "spintune/v1/spintune.grpc.pb.h"

namespace {

using google::protobuf::internal::WireFormatLite;
constexpr char kSessionMethod[] = "/spintune.v1.Tuner/Session";

// The answer to one AgentMessage's bytes: a HelloAck, a BatchAck, or
// nothing (false).
bool Answer(const grpc::ByteBuffer& request, grpc::ByteBuffer* reply) {
  grpc::Slice slice;
  std::string joined;
  const uint8_t* data;
  size_t size;
  if (request.TrySingleSlice(&slice).ok()) {
    data = slice.begin();
    size = slice.size();
  } else {
    std::vector<grpc::Slice> slices;
    if (!request.Dump(&slices).ok()) return false;
    for (const auto& s : slices) joined.append(reinterpret_cast<const char*>(s.begin()), s.size());
    data = reinterpret_cast<const uint8_t*>(joined.data());
    size = joined.size();
  }
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  const uint32_t tag = in.ReadTag();
  spintune::v1::TunerMessage answer;
  if (WireFormatLite::GetTagFieldNumber(tag) == spintune::v1::AgentMessage::kHelloFieldNumber) {
    answer.mutable_hello_ack()->set_accepts_bucket_bytes(true);
  } else if (WireFormatLite::GetTagFieldNumber(tag) ==
             spintune::v1::AgentMessage::kBatchFieldNumber) {
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return false;
    in.PushLimit(static_cast<int>(length));
    uint64_t seq = 0;
    for (uint32_t t = in.ReadTag(); t != 0; t = in.ReadTag()) {
      if (t == WireFormatLite::MakeTag(spintune::v1::SampleBatch::kSeqFieldNumber,
                                       WireFormatLite::WIRETYPE_VARINT)) {
        if (!in.ReadVarint64(&seq)) return false;
        break;
      }
      if (!WireFormatLite::SkipField(&in, t)) return false;
    }
    answer.mutable_batch_ack()->set_seq(seq);
  } else {
    return false;
  }
  bool own = false;
  return grpc::SerializationTraits<spintune::v1::TunerMessage>::Serialize(answer, reply, &own)
      .ok();
}

// --api callback: a reactor per stream; one read and one write in flight.
class NullReactor final : public grpc::ServerGenericBidiReactor {
 public:
  NullReactor() { StartRead(&in_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      std::lock_guard<std::mutex> lock(mu_);
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    grpc::ByteBuffer reply;
    if (Answer(in_, &reply)) {
      std::lock_guard<std::mutex> lock(mu_);
      out_.push_back(std::move(reply));
      if (out_.size() == 1) StartWrite(&out_.front());
    }
    StartRead(&in_);
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    out_.pop_front();
    if (!ok) out_.clear();
    if (!out_.empty()) {
      StartWrite(&out_.front());
    } else {
      MaybeFinishLocked();
    }
  }
  void OnDone() override { delete this; }
  void OnCancel() override {}

 private:
  void MaybeFinishLocked() {
    if (reads_done_ && out_.empty() && !finished_) {
      finished_ = true;
      Finish(grpc::Status::OK);
    }
  }
  grpc::ByteBuffer in_;
  std::mutex mu_;
  std::deque<grpc::ByteBuffer> out_;  // front: being written
  bool reads_done_ = false;
  bool finished_ = false;
};

class NullCallbackService final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    if (context->method() == kSessionMethod) return new NullReactor();
    return CallbackGenericService::CreateReactor(context);  // UNIMPLEMENTED
  }
};

// --api async: one stream's state machine on one completion queue. A tag
// is one of the stream's Op slots: which stream, which operation.
class AsyncStream {
 public:
  enum Kind { kArrived, kRead, kWritten, kFinished };
  struct Op {
    AsyncStream* stream;
    Kind kind;
  };

  AsyncStream(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq)
      : service_(service), cq_(cq), stream_(&context_) {
    for (int k = 0; k < 4; ++k) ops_[k] = Op{this, static_cast<Kind>(k)};
    service_->RequestCall(&context_, &stream_, cq_, cq_, &ops_[kArrived]);
  }
  // One completed operation; false when the stream is over (delete it).
  bool Handle(Kind kind, bool ok) {
    switch (kind) {
      case kArrived:
        if (!ok) return false;  // shutting down
        new AsyncStream(service_, cq_);  // waits for the next stream
        if (context_.method() != kSessionMethod) {
          finishing_ = true;
          stream_.Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""), &ops_[kFinished]);
          return true;
        }
        StartRead();
        return true;
      case kRead:
        if (!ok) {
          reads_done_ = true;
          break;
        }
        {
          grpc::ByteBuffer reply;
          if (Answer(in_, &reply)) {
            out_.push_back(std::move(reply));
            if (!writing_) StartWrite();
          }
        }
        StartRead();
        break;
      case kWritten:
        writing_ = false;
        out_.pop_front();
        if (!ok) out_.clear();
        if (!out_.empty()) StartWrite();
        break;
      case kFinished:
        return false;
    }
    if (reads_done_ && !writing_ && !finishing_) {
      finishing_ = true;
      stream_.Finish(grpc::Status::OK, &ops_[kFinished]);
    }
    return true;
  }

 private:
  void StartRead() {
    stream_.Read(&in_, &ops_[kRead]);
  }
  void StartWrite() {
    writing_ = true;
    stream_.Write(out_.front(), &ops_[kWritten]);
  }

  grpc::AsyncGenericService* service_;
  grpc::ServerCompletionQueue* cq_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_;
  Op ops_[4];
  grpc::ByteBuffer in_;
  std::deque<grpc::ByteBuffer> out_;  // front: being written
  bool writing_ = false, reads_done_ = false, finishing_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  spintune::SetUpProcess();  // before any thread starts
  std::string listen = "127.0.0.1:0";
  std::string api = "callback";
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  CLI::App app{
      "A Tuner.Session server that only acknowledges (no decoding, storage or fits): gRPC's own "
      "cost under spintune-loadgen --fleet."};
  app.add_option("--listen", listen, "Address to listen on (port 0: any free port)");
  app.add_option("--api", api, "gRPC server API: callback (as spintune-tuner) or async")
      ->check(CLI::IsMember({"callback", "async"}));
  app.add_option("--threads", threads, "--api async: completion-queue threads")
      ->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  NullCallbackService callback_service;
  grpc::AsyncGenericService async_service;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs;
  if (api == "callback") {
    builder.RegisterCallbackGenericService(&callback_service);
  } else {
    builder.RegisterAsyncGenericService(&async_service);
    for (int i = 0; i < threads; ++i) cqs.push_back(builder.AddCompletionQueue());
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "spintune-null-tuner: cannot listen on " << listen << "\n";
    return 1;
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  std::cout << "spintune-null-tuner (" << api << ") listening on " << host << ":" << port
            << std::endl;

  std::vector<std::thread> pollers;
  for (auto& cq : cqs) {
    grpc::ServerCompletionQueue* q = cq.get();
    pollers.emplace_back([&async_service, q] {
      new AsyncStream(&async_service, q);
      void* tag;
      bool ok;
      while (q->Next(&tag, &ok)) {
        auto* op = static_cast<AsyncStream::Op*>(tag);
        if (!op->stream->Handle(op->kind, ok)) delete op->stream;
      }
    });
  }
  {
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    spintune::SignalWaiter waiter([&](int) {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return stop; });
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  for (auto& cq : cqs) cq->Shutdown();
  for (auto& t : pollers) t.join();
  return 0;
}
