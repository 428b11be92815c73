#include "tuner/tuner_service.h"

#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/printable.h"
#include "proto/session_metadata.h"

namespace spintune {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

namespace {

class SessionReactor;

// Most bytes queued for one agent before the tuner gives up on it: an agent
// that does not read its stream must not grow the tuner.
constexpr uint64_t kMaxOutgoingBytes = 64ull << 20;

// The part of a stream that outlives its reactor while work for it is queued
// in the core: the read and write state and the finish rules.
//
// Rules: one read and one write in flight; Finish() exactly once, only when
// no write is in flight, and either on Fail(), on cancellation, or once the
// agent closed its side, no job is pending and the queue is empty. A new read
// starts only while fewer than the stream window of its messages are in the
// core and the core has room (TunerCore::AdmitRead); otherwise it starts
// when that changes (JobDone, ResumeReading). The reactor is touched only
// before Finish() or while a read or write is in flight, so it is alive
// whenever it is used.
class SessionState final : public SessionHandle,
                           public std::enable_shared_from_this<SessionState> {
 public:
  SessionState(SessionReactor* reactor, TunerCore* core, grpc::ByteBuffer* request)
      : reactor_(reactor), core_(core), request_(request) {}

  void Send(v1::TunerMessage message) override {
    Queue(std::move(message));
    Pump();
  }

  void Queue(v1::TunerMessage message) override {
    bool overflow = false;
    {
      absl::MutexLock lock(&mu_);
      if (finish_called_ || write_failed_) return;
      const uint64_t size = message.ByteSizeLong();
      if (queued_bytes_ + size > kMaxOutgoingBytes) {
        overflow = true;
      } else {
        queued_bytes_ += size;
        queue_.push_back(std::move(message));
      }
    }
    if (overflow) {
      Fail(absl::ResourceExhaustedError(
          "the agent does not read what the tuner sends (64 MiB queued); closing"));
    }
  }

  void Flush() override { Pump(); }

  void Fail(absl::Status status) override {
    {
      absl::MutexLock lock(&mu_);
      if (finish_requested_) return;
      finish_requested_ = true;
      finish_status_ = ToGrpcStatus(status);
    }
    Pump();
  }

  bool open() const override {
    absl::MutexLock lock(&mu_);
    return !finish_requested_ && !finish_called_ && !write_failed_ && !cancelled_;
  }

  void ResumeReading() override { MaybeRead(); }

  void JobStarted() {
    absl::MutexLock lock(&mu_);
    ++pending_jobs_;
  }
  void JobDone() {
    {
      absl::MutexLock lock(&mu_);
      --pending_jobs_;
    }
    MaybeRead();
    Pump();
  }
  // OnReadDone: the read finished (ok: a message's bytes are in *request_).
  void ReadDone(bool ok) {
    {
      absl::MutexLock lock(&mu_);
      reading_ = false;
      if (!ok) reads_done_ = true;
    }
    if (!ok) Pump();
  }
  void Cancelled() {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      if (!finish_requested_) {
        finish_requested_ = true;
        finish_status_ = grpc::Status(grpc::CANCELLED, "cancelled");
      }
    }
    Pump();
  }
  void WriteDone(bool ok) {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      queued_bytes_ -= in_flight_bytes_;
      in_flight_bytes_ = 0;
      if (!ok) {
        write_failed_ = true;
        queue_.clear();
        queued_bytes_ = 0;
      }
    }
    Pump();
  }
  void Detach() {
    absl::MutexLock lock(&mu_);
    reactor_ = nullptr;
  }
  bool finishing() {
    absl::MutexLock lock(&mu_);
    return finish_requested_ || finish_called_;
  }

  // Starts the next read when the window and the core allow it.
  void MaybeRead();
  // Starts the next write or the Finish, outside the lock.
  void Pump();

 private:
  bool CanRead() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return reactor_ != nullptr && !reading_ && !reads_done_ && !finish_requested_ &&
           !finish_called_ && pending_jobs_ < core_->options().stream_window;
  }

  mutable absl::Mutex mu_;
  // StartRead() and Finish() one at a time. Recursive (absl has no such
  // mutex): gRPC may run a reaction that calls back in on this thread.
  std::recursive_mutex call_mu_;
  SessionReactor* reactor_ ABSL_GUARDED_BY(mu_);
  TunerCore* const core_;
  grpc::ByteBuffer* const request_;  // the reactor's read buffer
  std::deque<v1::TunerMessage> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // queue_ and in_flight_
  // Serialized; written under mu_ when a write starts, then stable (read by
  // gRPC) until OnWriteDone.
  grpc::ByteBuffer in_flight_;
  uint64_t in_flight_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  size_t pending_jobs_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
};

// The bytes of the batch an AgentMessage's `bytes` carry (its only field,
// AgentMessage.batch), or "" when they hold more than that.
absl::string_view BatchBytes(absl::string_view bytes) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  uint32_t size = 0;
  if (in.ReadTag() != google::protobuf::internal::WireFormatLite::MakeTag(
                          v1::AgentMessage::kBatchFieldNumber,
                          google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED) ||
      !in.ReadVarint32(&size)) {
    return {};
  }
  const size_t at = static_cast<size_t>(in.CurrentPosition());
  if (at + size != bytes.size()) return {};
  return bytes.substr(at);
}

// The arena a read is parsed into: its first block is this thread's, kept
// from read to read, so a batch's messages (per key a KeyHistogram, its
// HistogramDelta and two packed arrays) cost no malloc and free each. A
// message larger than the block takes further blocks, freed with the arena.
// A second arena on the thread while one lives (a reaction run inside
// another) allocates its own blocks.
class ReadArena {
 public:
  ReadArena() : owner_(!block_.in_use), arena_(Options(owner_)) {
    if (owner_) block_.in_use = true;
  }
  ~ReadArena() {
    // arena_ is destroyed right after this, on this thread: no other
    // ReadArena here can take the block before it is done with it.
    if (owner_) block_.in_use = false;
  }
  ReadArena(const ReadArena&) = delete;
  ReadArena& operator=(const ReadArena&) = delete;
  google::protobuf::Arena* get() { return &arena_; }

 private:
  static constexpr size_t kBlockBytes = 256 << 10;  // a 64-key batch needs about 100 KiB
  struct Block {
    std::unique_ptr<char[]> bytes;
    bool in_use = false;
  };
  static google::protobuf::ArenaOptions Options(bool owner) {
    google::protobuf::ArenaOptions o;
    if (owner) {
      if (!block_.bytes) block_.bytes = std::make_unique<char[]>(kBlockBytes);
      o.initial_block = block_.bytes.get();
      o.initial_block_size = kBlockBytes;
    }
    return o;
  }
  static thread_local Block block_;

  const bool owner_;
  google::protobuf::Arena arena_;
};
thread_local ReadArena::Block ReadArena::block_;

// Reads raw messages (the Session method is registered raw): a batch is
// fingerprinted by the bytes the agent sent, not by serializing it again
// (TunerCore::OnBatch).
class SessionReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `refusal` not OK: the call is refused before anything is read.
  // `bound_target` not empty: the only agent id this stream may report for.
  SessionReactor(TunerCore* core, grpc::CallbackServerContext* context, std::string peer,
                 const grpc::Status& refusal, std::string bound_target, std::string token_name)
      : core_(core),
        context_(context),
        peer_(std::move(peer)),
        bound_target_(std::move(bound_target)),
        token_name_(std::move(token_name)),
        state_(std::make_shared<SessionState>(this, core, &read_)) {
    if (!refusal.ok()) {
      Finish(refusal);
      return;
    }
    core_->OnOpen(state_);
    state_->MaybeRead();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      state_->ReadDone(false);
      return;
    }
    const absl::string_view bytes = ReceivedBytes();
    absl::Status refused;
    {
      ReadArena arena;
      auto* request = google::protobuf::Arena::CreateMessage<v1::AgentMessage>(arena.get());
      refused = request->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))
                    ? Dispatch(*request, bytes)
                    : absl::InvalidArgumentError("an agent message that does not parse");
    }
    ReleaseRead(bytes.size());
    state_->ReadDone(true);
    if (!refused.ok()) return state_->Fail(refused);
    state_->MaybeRead();
  }

  void OnWriteDone(bool ok) override { state_->WriteDone(ok); }

  // Finish() for the state: an UNAVAILABLE of the tuner's own (its storage)
  // is marked as such, so the agent backs off instead of giving up on it.
  void FinishWith(const grpc::Status& status) {
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      context_->AddTrailingMetadata(kRetryLaterTrailer, "1");
    }
    Finish(status);
  }

  void OnCancel() override {
    Logger().debug("session from {} cancelled", peer_);
    state_->Cancelled();
  }

  void OnDone() override {
    state_->Detach();
    if (seen_hello_) core_->OnSessionEnd(state_);
    delete this;
  }

 private:
  // Hands a parsed message (`bytes`: as received) to the core; an error
  // refuses the stream.
  absl::Status Dispatch(v1::AgentMessage& request, absl::string_view bytes) {
    auto state = state_;
    auto done = [state] { state->JobDone(); };
    switch (request.msg_case()) {
      case v1::AgentMessage::kHello:
        if (seen_hello_) return absl::FailedPreconditionError("second hello");
        seen_hello_ = true;
        if (!bound_target_.empty() && request.hello().agent_id() != bound_target_) {
          core_->CountRefusedCall(/*authenticated=*/true);
          Logger().warn("refused {}: token '{}' reporting as '{}'", peer_, token_name_,
                        Printable(request.hello().agent_id()));
          return absl::PermissionDeniedError(
              absl::StrCat("token '", token_name_, "' is for target '", bound_target_,
                           "', not '", Printable(request.hello().agent_id()), "'"));
        }
        state_->JobStarted();
        hello_ = request.hello();  // batches are decoded against it here
        core_->OnHello(state_, hello_, done);
        return absl::OkStatus();
      case v1::AgentMessage::kBatch:
      case v1::AgentMessage::kApplied:
      case v1::AgentMessage::kDrain:
      case v1::AgentMessage::kKnobsDeclared:
      case v1::AgentMessage::kKnobTrial:
      case v1::AgentMessage::kKnobApplied:
        if (!seen_hello_) return absl::FailedPreconditionError("the first message must be hello");
        state_->JobStarted();
        if (request.has_batch()) {
          // Decoded from the read buffer in place.
          core_->OnBatch(state_, hello_, request.batch(), BatchBytes(bytes), done);
        } else if (request.has_applied()) {
          core_->OnApplied(state_, request.applied(), done);
        } else if (request.has_drain()) {
          core_->OnDrain(state_, done);
        } else {
          core_->OnKnobMessage(state_, request, done);
        }
        return absl::OkStatus();
      default:
        return absl::InvalidArgumentError("empty agent message");
    }
  }

  // Messages up to this size keep their buffers for the stream's next read.
  static constexpr size_t kKeptReadBytes = 256 << 10;

  // The bytes of the read that just finished, contiguous: the read buffer's
  // own slice when it has one (no copy), else its slices copied into bytes_.
  // Valid until ReleaseRead().
  absl::string_view ReceivedBytes() {
    if (read_.TrySingleSlice(&slice_).ok()) {
      return {reinterpret_cast<const char*>(slice_.begin()), slice_.size()};
    }
    std::vector<grpc::Slice> slices;
    if (!read_.Dump(&slices).ok()) slices.clear();
    bytes_.clear();
    for (const grpc::Slice& s : slices) {
      bytes_.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    return bytes_;
  }

  // Drops the read's bytes. A large message's copy is freed, not kept:
  // kept, each stream would hold a copy of the largest message it ever sent
  // (docs/reliability.md's bound).
  void ReleaseRead(size_t size) {
    slice_ = grpc::Slice();
    read_.Clear();
    if (size > kKeptReadBytes) {
      std::string().swap(bytes_);
    } else {
      bytes_.clear();
    }
  }

  TunerCore* core_;
  grpc::CallbackServerContext* const context_;  // the call's; outlives the reactor
  std::string peer_;
  std::string bound_target_;
  std::string token_name_;
  grpc::ByteBuffer read_;       // the read in flight
  grpc::Slice slice_;           // its one slice, when it has one
  std::string bytes_;           // else its bytes copied, contiguous
  std::shared_ptr<SessionState> state_;
  bool seen_hello_ = false;  // reactions run one at a time per stream
  v1::Hello hello_;
};

void SessionState::MaybeRead() {
  {
    absl::MutexLock lock(&mu_);
    if (!CanRead()) return;
  }
  // Over the core's memory bound: it calls ResumeReading() when there is room.
  if (!core_->AdmitRead(shared_from_this())) return;
  // No Finish() between the check and StartRead() (after Finish the reactor
  // may be gone).
  std::lock_guard<std::recursive_mutex> call(call_mu_);
  SessionReactor* reactor = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!CanRead()) return;
    reading_ = true;
    reactor = reactor_;
  }
  reactor->StartRead(request_);
}

void SessionState::Pump() {
  enum { kNothing, kWrite, kFinish } action = kNothing;
  SessionReactor* reactor = nullptr;
  grpc::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (finish_called_ || writing_ || reactor_ == nullptr) return;
    if (!queue_.empty() && !write_failed_ && !cancelled_) {
      bool own_buffer = false;
      in_flight_bytes_ = queue_.front().ByteSizeLong();
      in_flight_.Clear();  // (the last write's, done)
      grpc::SerializationTraits<v1::TunerMessage>::Serialize(queue_.front(), &in_flight_,
                                                            &own_buffer);
      queue_.pop_front();
      writing_ = true;
      action = kWrite;
    } else if (finish_requested_ || write_failed_ || (reads_done_ && pending_jobs_ == 0)) {
      // A read may still be in flight: gRPC completes it (not ok) before OnDone.
      finish_called_ = true;
      action = kFinish;
      status = finish_status_;
    }
    reactor = reactor_;
  }
  if (action == kWrite) reactor->StartWrite(&in_flight_);
  if (action == kFinish) {
    std::lock_guard<std::recursive_mutex> call(call_mu_);
    reactor->FinishWith(status);
  }
}

}  // namespace

TunerService::Caller TunerService::Authorize(grpc::CallbackServerContext* context,
                                            bool admin_rpc) {
  Caller c;
  if (!core_->options().require_tokens) return c;
  const std::string token = BearerToken(*context);
  if (token.empty()) {
    c.refusal = grpc::Status(grpc::UNAUTHENTICATED,
                             "this tuner requires a bearer token (--token-file)");
  } else if (auto record = core_->Authenticate(token); !record.ok()) {
    c.refusal = grpc::Status(grpc::UNAUTHENTICATED, "unknown or revoked token");
  } else {
    c.token_name = record->name;
    if (admin_rpc && !record->admin) {
      c.refusal = grpc::Status(grpc::PERMISSION_DENIED,
                               absl::StrCat("token '", record->name, "' is not an admin token"));
    }
    if (!record->admin) c.bound_target = record->target;
  }
  if (!c.refusal.ok()) {
    core_->CountRefusedCall(c.refusal.error_code() == grpc::PERMISSION_DENIED);
    Logger().warn("refused {}: {}", context->peer(), c.refusal.error_message());
  }
  return c;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* TunerService::Session(
    grpc::CallbackServerContext* context) {
  Caller c = Authorize(context, /*admin_rpc=*/false);
  return new SessionReactor(core_, context, context->peer(), c.refusal, c.bound_target,
                            c.token_name);
}

grpc::ServerUnaryReactor* TunerService::ListTargets(grpc::CallbackServerContext* context,
                                                    const v1::ListTargetsRequest*,
                                                    v1::ListTargetsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (Caller c = Authorize(context, /*admin_rpc=*/true); !c.refusal.ok()) {
    reactor->Finish(c.refusal);
    return reactor;
  }
  core_->ListTargets([reactor, response](absl::StatusOr<v1::ListTargetsResponse> r) {
    if (r.ok()) *response = std::move(*r);
    reactor->Finish(ToGrpcStatus(r.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* TunerService::GetPolicy(grpc::CallbackServerContext* context,
                                                  const v1::GetPolicyRequest* request,
                                                  v1::GetPolicyResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (Caller c = Authorize(context, /*admin_rpc=*/true); !c.refusal.ok()) {
    reactor->Finish(c.refusal);
    return reactor;
  }
  core_->GetPolicy(*request, [reactor, response](absl::StatusOr<v1::GetPolicyResponse> r) {
    if (r.ok()) *response = std::move(*r);
    reactor->Finish(ToGrpcStatus(r.status()));
  });
  return reactor;
}

}  // namespace spintune
