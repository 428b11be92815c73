#include "tuner/tuner_server.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tuner/tuner_service.h"

namespace spintune {

absl::StatusOr<std::unique_ptr<TunerServer>> TunerServer::Start(
    const std::string& listen_address, const TunerOptions& options) {
  std::unique_ptr<TunerServer> s(new TunerServer());
  SPINTUNE_ASSIGN_OR_RETURN(s->core_, TunerCore::Create(options));
  s->service_ = std::make_unique<TunerService>(s->core_.get());
  grpc::ServerBuilder builder;
  // Two servers on one fixed port must not both "succeed".
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  SPINTUNE_ASSIGN_OR_RETURN(auto credentials, MakeServerCredentials(options.tls));
  builder.AddListeningPort(listen_address, credentials, &s->port_);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen_address));
  }
  const size_t colon = listen_address.rfind(':');
  s->address_ = absl::StrCat(listen_address.substr(0, colon), ":", s->port_);
  return s;
}

TunerServer::~TunerServer() {
  if (server_) Shutdown(absl::Seconds(5));
}

void TunerServer::Shutdown(absl::Duration deadline) {
  if (!server_) return;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + deadline));
  server_->Wait();
  server_.reset();
  core_.reset();  // finishes queued work
}

void TunerServer::Wait() {
  if (server_) server_->Wait();
}

}  // namespace spintune
