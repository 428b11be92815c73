// TunerService: the gRPC face of TunerCore (callback API). With
// TunerOptions::require_tokens every call needs a valid bearer token: no or
// an unknown/revoked token is UNAUTHENTICATED; an agent token used for
// another target's hello, or for an admin RPC, is PERMISSION_DENIED. One
// SessionReactor per agent stream holds all per-stream state; reactions only
// post work to the core and never block; every stream ends in exactly one
// Finish(). The only conversion from absl::Status to grpc::Status is here.
//
// Thread-safety: gRPC calls it from its own threads; it is safe for that.
#ifndef SPINTUNE_TUNER_TUNER_SERVICE_H_
#define SPINTUNE_TUNER_TUNER_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "spintune/v1/spintune.grpc.pb.h"
#include "tuner/tuner_core.h"

namespace spintune {

// The one absl -> gRPC status conversion (same canonical codes).
grpc::Status ToGrpcStatus(const absl::Status& status);

// The Session method is registered raw (ByteBuffer in and out): the reactor
// parses and serializes the messages itself, so that it has the bytes of
// each batch as the agent sent them (TunerCore::OnBatch).
class TunerService final
    : public v1::Tuner::WithRawCallbackMethod_Session<v1::Tuner::WithCallbackMethod_ListTargets<
          v1::Tuner::WithCallbackMethod_GetPolicy<v1::Tuner::Service>>> {
 public:
  // `core` must outlive the service and every stream it serves.
  explicit TunerService(TunerCore* core) : core_(core) {}

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Session(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ListTargets(grpc::CallbackServerContext* context,
                                        const v1::ListTargetsRequest* request,
                                        v1::ListTargetsResponse* response) override;
  grpc::ServerUnaryReactor* GetPolicy(grpc::CallbackServerContext* context,
                                      const v1::GetPolicyRequest* request,
                                      v1::GetPolicyResponse* response) override;

 private:
  // Who is calling, when the tuner requires tokens.
  struct Caller {
    grpc::Status refusal;      // not OK: refuse the call with it
    std::string bound_target;  // an agent token's target ("" for admin)
    std::string token_name;
  };
  Caller Authorize(grpc::CallbackServerContext* context, bool admin_rpc);

  TunerCore* core_;
};

}  // namespace spintune

#endif  // SPINTUNE_TUNER_TUNER_SERVICE_H_
