#include "tuner/tuner_service.h"

#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace spintune {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

namespace {

class SessionReactor;

// The part of a stream that outlives its reactor while work for it is queued
// in the core: the write queue and the finish rules.
//
// Rules: one write in flight; Finish() exactly once, only when no write is in
// flight, and either on Fail() or once the agent closed its side, no job is
// pending and the queue is empty. The reactor is touched only while a write
// is in flight or before Finish(), so it is alive whenever it is used.
class SessionState final : public SessionHandle {
 public:
  explicit SessionState(SessionReactor* reactor) : reactor_(reactor) {}

  void Send(v1::TunerMessage message) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finish_called_ || write_failed_) return;
      queue_.push_back(std::move(message));
    }
    Pump();
  }

  void Fail(absl::Status status) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finish_requested_) return;
      finish_requested_ = true;
      finish_status_ = ToGrpcStatus(status);
    }
    Pump();
  }

  void JobStarted() {
    std::lock_guard<std::mutex> lock(mu_);
    ++pending_jobs_;
  }
  void JobDone() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --pending_jobs_;
    }
    Pump();
  }
  void ReadsDone() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      reads_done_ = true;
    }
    Pump();
  }
  void WriteDone(bool ok) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) {
        write_failed_ = true;
        queue_.clear();
      }
    }
    Pump();
  }
  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    reactor_ = nullptr;
  }
  bool finishing() {
    std::lock_guard<std::mutex> lock(mu_);
    return finish_requested_ || finish_called_;
  }

  // Starts the next write or the Finish, outside the lock.
  void Pump();

 private:
  std::mutex mu_;
  SessionReactor* reactor_;
  std::deque<v1::TunerMessage> queue_;
  v1::TunerMessage in_flight_;  // stable until OnWriteDone
  bool writing_ = false;
  bool write_failed_ = false;
  bool reads_done_ = false;
  bool finish_requested_ = false;
  bool finish_called_ = false;
  int pending_jobs_ = 0;
  grpc::Status finish_status_;
};

class SessionReactor final
    : public grpc::ServerBidiReactor<v1::AgentMessage, v1::TunerMessage> {
 public:
  // `refusal` not OK: the call is refused before anything is read.
  // `bound_target` not empty: the only agent id this stream may report for.
  SessionReactor(TunerCore* core, std::string peer, const grpc::Status& refusal,
                 std::string bound_target, std::string token_name)
      : core_(core),
        peer_(std::move(peer)),
        bound_target_(std::move(bound_target)),
        token_name_(std::move(token_name)),
        state_(std::make_shared<SessionState>(this)) {
    if (!refusal.ok()) {
      Finish(refusal);
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      state_->ReadsDone();
      return;
    }
    auto state = state_;
    auto done = [state] { state->JobDone(); };
    switch (request_.msg_case()) {
      case v1::AgentMessage::kHello:
        if (seen_hello_) return state_->Fail(absl::FailedPreconditionError("second hello"));
        seen_hello_ = true;
        if (!bound_target_.empty() && request_.hello().agent_id() != bound_target_) {
          core_->CountRefusedCall(/*authenticated=*/true);
          Logger().warn("refused {}: token '{}' reporting as '{}'", peer_, token_name_,
                        request_.hello().agent_id());
          return state_->Fail(absl::PermissionDeniedError(
              absl::StrCat("token '", token_name_, "' is for target '", bound_target_,
                           "', not '", request_.hello().agent_id(), "'")));
        }
        state_->JobStarted();
        core_->OnHello(state_, std::move(*request_.mutable_hello()), done);
        break;
      case v1::AgentMessage::kBatch:
      case v1::AgentMessage::kApplied:
      case v1::AgentMessage::kDrain:
        if (!seen_hello_) {
          return state_->Fail(absl::FailedPreconditionError("the first message must be hello"));
        }
        state_->JobStarted();
        if (request_.has_batch()) {
          core_->OnBatch(state_, std::move(*request_.mutable_batch()), done);
        } else if (request_.has_applied()) {
          core_->OnApplied(state_, std::move(*request_.mutable_applied()), done);
        } else {
          core_->OnDrain(state_, done);
        }
        break;
      default:
        return state_->Fail(absl::InvalidArgumentError("empty agent message"));
    }
    if (state_->finishing()) return;
    request_.Clear();
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override { state_->WriteDone(ok); }

  void OnCancel() override { Logger().debug("session from {} cancelled", peer_); }

  void OnDone() override {
    state_->Detach();
    if (seen_hello_) core_->OnSessionEnd(state_);
    delete this;
  }

 private:
  TunerCore* core_;
  std::string peer_;
  std::string bound_target_;
  std::string token_name_;
  std::shared_ptr<SessionState> state_;
  v1::AgentMessage request_;
  bool seen_hello_ = false;  // reactions run one at a time per stream
};

void SessionState::Pump() {
  enum { kNothing, kWrite, kFinish } action = kNothing;
  SessionReactor* reactor = nullptr;
  grpc::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_called_ || writing_ || reactor_ == nullptr) return;
    if (!queue_.empty() && !write_failed_) {
      in_flight_ = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      action = kWrite;
    } else if (finish_requested_ || write_failed_ || (reads_done_ && pending_jobs_ == 0)) {
      finish_called_ = true;
      action = kFinish;
      status = finish_status_;
    }
    reactor = reactor_;
  }
  if (action == kWrite) reactor->StartWrite(&in_flight_);
  if (action == kFinish) reactor->Finish(status);
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

grpc::ServerBidiReactor<v1::AgentMessage, v1::TunerMessage>* TunerService::Session(
    grpc::CallbackServerContext* context) {
  Caller c = Authorize(context, /*admin_rpc=*/false);
  return new SessionReactor(core_, context->peer(), c.refusal, c.bound_target, c.token_name);
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
