#include "bench/fleet_streams.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/capture/histogram_batch.h"
#include "common/status_macros.h"
#include "models/latency_histogram.h"
#include "spintune/v1/spintune.grpc.pb.h"
#include "tests/testing/wire_messages.h"

namespace spintune {
namespace {

// The tests' well-formed Hello, as this benchmark's board.
v1::Hello FleetHello(const std::string& agent_id) {
  v1::Hello h = testing::GoodHello(agent_id);
  h.mutable_target()->set_board("fleet-board");
  h.mutable_devices(0)->set_driver("fleet-mmc");
  h.mutable_devices(0)->set_model("fleet-card");
  return h;
}

// One interval of `keys` keys, `samples` completions each (lognormal around
// 50..250 us), as histogram deltas.
v1::SampleBatch HistogramTemplate(uint32_t keys, uint32_t samples, uint64_t seed) {
  std::mt19937_64 rng(seed);
  v1::SampleBatch b;
  for (uint32_t k = 0; k < keys; ++k) {
    std::lognormal_distribution<double> dist(std::log(50'000.0 + 3'000.0 * (k % 64)), 0.3);
    LatencyHistogram h;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < samples; ++i) {
      const uint64_t ns = static_cast<uint64_t>(dist(rng));
      h.Record(ns);
      sum += ns;
    }
    auto* kh = b.add_histograms();
    kh->set_device_index(0);
    kh->set_cpu_class_index(0);
    kh->set_opcode(k);
    kh->set_size_class(12);
    auto* w = kh->mutable_wait();
    int previous = 0;
    for (const auto& [index, count] : h.buckets()) {
      w->add_bucket_index(static_cast<uint32_t>(w->bucket_index_size() == 0 ? index
                                                                              : index - previous));
      w->add_bucket_count(count);
      previous = index;
    }
    w->set_count(h.total_count());
    w->set_sum_ns(sum);
    kh->set_irq_path(h.total_count());
  }
  return b;
}

// `samples` raw completions (lognormal around 50..225 us over 8 opcodes),
// all on the IRQ path, each with its dispatch sample (handler and wake
// times), as sample columns: what a simulated board's agent sends.
v1::SampleBatch RawTemplate(uint32_t samples, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> handler(std::log(3'000.0), 0.3);
  std::lognormal_distribution<double> wake(std::log(8'000.0), 0.3);
  v1::SampleBatch b;
  auto* c = b.mutable_completions();
  auto* d = b.mutable_dispatches();
  for (uint32_t i = 0; i < samples; ++i) {
    const uint32_t opcode = static_cast<uint32_t>(rng() % 8);
    std::lognormal_distribution<double> dist(std::log(50'000.0 + 25'000.0 * opcode), 0.3);
    c->add_wait_ns(static_cast<uint64_t>(dist(rng)));
    c->add_device_index(0);
    c->add_cpu_class_index(0);
    c->add_opcode(opcode);
    c->add_bytes(4096);
    c->add_path(v1::WAIT_PATH_IRQ);
    c->add_flags(0);
    d->add_cpu_class_index(0);
    d->add_device_index(0);
    d->add_handler_ns(static_cast<uint64_t>(handler(rng)));
    d->add_wake_ns(static_cast<uint64_t>(wake(rng)));
  }
  return b;
}

struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  LatencyHistogram ack_latency;
  std::atomic<uint64_t> hellos{0};
  std::atomic<uint64_t> acked{0};
  std::atomic<uint64_t> samples_acked{0};
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> refused{0};
  std::atomic<int> done{0};
};

// What every agent sends, serialized once: an agent's batch is the
// AgentMessage.batch field's tag and length, its seq, then these bytes (the
// template without a seq), in two slices: no copy or serialization per send.
// The bytes are what the tuner's deterministic serialization of the parsed
// batch gives (fields in number order), as a real agent's.
class BatchBytes {
 public:
  explicit BatchBytes(const v1::SampleBatch& batch) {
    v1::SampleBatch rest = batch;
    rest.clear_seq();
    rest.SerializeToString(&rest_);
  }
  // The AgentMessage carrying the template with `seq`.
  grpc::ByteBuffer Message(uint64_t seq) const {
    std::string head;
    google::protobuf::io::StringOutputStream out(&head);
    {
      google::protobuf::io::CodedOutputStream coded(&out);
      const size_t seq_bytes = 1 + google::protobuf::io::CodedOutputStream::VarintSize64(seq);
      coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
          v1::AgentMessage::kBatchFieldNumber,
          google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
      coded.WriteVarint64(seq_bytes + rest_.size());
      coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
          v1::SampleBatch::kSeqFieldNumber, google::protobuf::internal::WireFormatLite::WIRETYPE_VARINT));
      coded.WriteVarint64(seq);
    }
    grpc::Slice slices[2] = {grpc::Slice(head),
                             grpc::Slice(rest_.data(), rest_.size(), grpc::Slice::STATIC_SLICE)};
    return grpc::ByteBuffer(slices, 2);
  }

 private:
  std::string rest_;
};

grpc::ByteBuffer Serialized(const v1::AgentMessage& m) {
  grpc::ByteBuffer out;
  bool own = false;
  grpc::SerializationTraits<v1::AgentMessage>::Serialize(m, &out, &own);
  return out;
}

using SessionStub = grpc::TemplatedGenericStub<grpc::ByteBuffer, v1::TunerMessage>;
constexpr char kSessionMethod[] = "/spintune.v1.Tuner/Session";

class FleetAgent final : public grpc::ClientBidiReactor<grpc::ByteBuffer, v1::TunerMessage> {
 public:
  FleetAgent(SessionStub* stub, std::string id, const BatchBytes* batch,
             uint64_t samples_per_batch, size_t max_unacked, const ClientSecurity& security,
             Shared* shared)
      : id_(std::move(id)),
        batch_(batch),
        samples_(samples_per_batch),
        max_unacked_(max_unacked),
        shared_(shared) {
    AddCallCredentials(security, &ctx_);
    stub->PrepareBidiStreamingCall(&ctx_, kSessionMethod, grpc::StubOptions(), this);
    v1::AgentMessage hello;
    *hello.mutable_hello() = FleetHello(id_);
    Enqueue(Serialized(hello));
    StartRead(&in_);
    StartCall();
  }

  // Sends the next batch (once the Hello was acknowledged).
  void SendBatch() {
    grpc::ByteBuffer m;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!ready_ || finishing_) return;
      if (max_unacked_ > 0 && sent_at_.size() >= max_unacked_) return;
      m = batch_->Message(++seq_);
      sent_at_[seq_] = absl::Now();
    }
    shared_->sent++;
    Enqueue(std::move(m));
  }
  void Finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      finishing_ = true;
    }
    ctx_.TryCancel();
  }
  bool ready() {
    std::lock_guard<std::mutex> lock(mu_);
    return ready_;
  }
  size_t outstanding() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_at_.size();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    const absl::Time now = absl::Now();
    if (in_.has_hello_ack()) {
      std::lock_guard<std::mutex> lock(mu_);
      ready_ = true;
      seq_ = in_.hello_ack().last_durable_seq();
      shared_->hellos++;
    } else if (in_.has_batch_ack()) {
      absl::Time sent = now;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = sent_at_.find(in_.batch_ack().seq());
        if (it != sent_at_.end()) {
          sent = it->second;
          sent_at_.erase(it);
        }
      }
      shared_->acked++;
      shared_->samples_acked += samples_;
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->ack_latency.Record(static_cast<uint64_t>(absl::ToInt64Nanoseconds(now - sent)));
    } else if (in_.has_rejected()) {
      shared_->refused++;
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    out_.pop_front();
    if (!ok) {
      out_.clear();
      writing_ = false;
      return;
    }
    if (out_.empty()) {
      writing_ = false;
    } else {
      StartWrite(&out_.front());
    }
  }

  void OnDone(const grpc::Status&) override {
    shared_->done++;
    shared_->cv.notify_all();
  }

 private:
  void Enqueue(grpc::ByteBuffer m) {
    std::lock_guard<std::mutex> lock(mu_);
    out_.push_back(std::move(m));
    if (!writing_) {
      writing_ = true;
      StartWrite(&out_.front());
    }
  }

  const std::string id_;
  const BatchBytes* batch_;
  const uint64_t samples_;
  const size_t max_unacked_;
  Shared* shared_;
  grpc::ClientContext ctx_;
  v1::TunerMessage in_;
  std::mutex mu_;
  std::deque<grpc::ByteBuffer> out_;  // front: being written
  bool writing_ = false;
  bool ready_ = false;
  bool finishing_ = false;
  uint64_t seq_ = 0;
  std::map<uint64_t, absl::Time> sent_at_;
};

}  // namespace

absl::StatusOr<FleetResult> RunFleetStreams(const FleetOptions& o) {
  if (o.agents < 1 || o.channels < 1 || o.keys < 1) {
    return absl::InvalidArgumentError("agents, channels and keys must be >= 1");
  }
  std::vector<std::unique_ptr<SessionStub>> stubs;
  for (int c = 0; c < o.channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection each
    SPINTUNE_ASSIGN_OR_RETURN(auto channel, MakeChannel(o.tuner, o.security, args));
    stubs.push_back(std::make_unique<SessionStub>(channel));
  }
  v1::SampleBatch batch_template = o.raw_samples > 0
                                      ? RawTemplate(o.raw_samples, 7)
                                      : HistogramTemplate(o.keys, o.samples_per_key, 7);
  if (o.histogram_bytes) PackBuckets(&batch_template);
  const BatchBytes batch(batch_template);
  const uint64_t samples = o.raw_samples > 0
                               ? o.raw_samples
                               : static_cast<uint64_t>(o.keys) * o.samples_per_key;
  Shared shared;
  std::vector<std::unique_ptr<FleetAgent>> fleet;
  const absl::Time start = absl::Now();
  for (int i = 0; i < o.agents; ++i) {
    fleet.push_back(std::make_unique<FleetAgent>(stubs[static_cast<size_t>(i) % stubs.size()].get(),
                                                 absl::StrCat(o.prefix, "-", i), &batch, samples,
                                                 o.max_unacked, o.security, &shared));
  }
  FleetResult r;
  r.agents = o.agents;
  const absl::Time hello_deadline = absl::Now() + absl::Minutes(5);
  while (shared.hellos < static_cast<uint64_t>(o.agents) && absl::Now() < hello_deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  r.hello_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (shared.hellos < static_cast<uint64_t>(o.agents)) {
    for (auto& a : fleet) a->Finish();
    return absl::DeadlineExceededError(absl::StrCat("only ", shared.hellos.load(), " of ",
                                                    o.agents, " hellos acknowledged in 5 min"));
  }
  // Each agent once per interval, at its own phase: the fleet's sends in
  // 10 ms slots.
  const absl::Time measure = absl::Now();
  const absl::Duration slot = absl::Milliseconds(10);
  const int64_t slots = std::max<int64_t>(1, absl::ToInt64Milliseconds(o.interval) / 10);
  for (int64_t n = 0; absl::Now() - measure < o.duration; ++n) {
    const int64_t s = n % slots;
    for (int i = 0; i < o.agents; ++i) {
      if (static_cast<int64_t>(i) * slots / o.agents == s) fleet[static_cast<size_t>(i)]->SendBatch();
    }
    const absl::Time next = measure + slot * (n + 1);
    if (next > absl::Now()) absl::SleepFor(next - absl::Now());
  }
  // The acks of what was sent.
  const absl::Time drain_deadline = absl::Now() + absl::Seconds(30);
  while (shared.acked + shared.refused < shared.sent && absl::Now() < drain_deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - measure);
  for (auto& a : fleet) a->Finish();
  {
    std::unique_lock<std::mutex> lock(shared.mu);
    shared.cv.wait_for(lock, std::chrono::seconds(30),
                       [&] { return shared.done.load() == o.agents; });
  }
  r.batches_sent = shared.sent;
  r.batches_acked = shared.acked;
  r.samples_acked = shared.samples_acked;
  r.refused = shared.refused;
  std::lock_guard<std::mutex> lock(shared.mu);
  r.ack_p50_ms = shared.ack_latency.QuantileNs(0.5) / 1e6;
  r.ack_p99_ms = shared.ack_latency.QuantileNs(0.99) / 1e6;
  r.ack_max_ms = shared.ack_latency.QuantileNs(1) / 1e6;
  return r;
}

}  // namespace spintune
