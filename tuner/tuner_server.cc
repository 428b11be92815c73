#include "tuner/tuner_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spintune/v1/spintune.grpc.pb.h"
#include "tuner/metrics_http_server.h"
#include "tuner/tuner_metrics.h"
#include "tuner/tuner_service.h"

namespace spintune {

absl::StatusOr<std::unique_ptr<TunerServer>> TunerServer::Start(
    const std::string& listen_address, const TunerOptions& options) {
  std::unique_ptr<TunerServer> s(new TunerServer());
  SPINTUNE_ASSIGN_OR_RETURN(s->core_, TunerCore::Create(options));
  s->service_ = std::make_unique<TunerService>(s->core_.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // Two servers on one fixed port must not both "succeed".
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  if (options.grpc_memory_bytes > 0) {
    grpc::ResourceQuota quota("spintune-tuner");
    quota.Resize(options.grpc_memory_bytes);
    builder.SetResourceQuota(quota);
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto credentials, MakeServerCredentials(options.tls));
  builder.AddListeningPort(listen_address, credentials, &s->port_);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen_address));
  }
  const size_t colon = listen_address.rfind(':');
  s->address_ = absl::StrCat(listen_address.substr(0, colon), ":", s->port_);
  if (auto* health = s->server_->GetHealthCheckService()) {
    health->SetServingStatus(true);
    health->SetServingStatus(v1::Tuner::service_full_name(), true);
  }
  return s;
}

absl::StatusOr<std::string> TunerServer::StartMetrics(const std::string& address) {
  TunerCore* core = core_.get();
  SPINTUNE_ASSIGN_OR_RETURN(
      metrics_, MetricsHttpServer::Start(address, [core] {
        return RenderPrometheusText(core->counters());
      }));
  return metrics_->address();
}

TunerServer::~TunerServer() {
  if (server_) Shutdown(absl::Seconds(5));
}

void TunerServer::Shutdown(absl::Duration deadline, TunerCounters* final_counters) {
  if (!server_) return;
  if (auto* health = server_->GetHealthCheckService()) health->Shutdown();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + deadline));
  server_->Wait();
  server_.reset();
  metrics_.reset();
  core_->Stop();  // after the unit of work it is on
  if (final_counters != nullptr) *final_counters = core_->counters();
  core_.reset();
}

void TunerServer::Wait() {
  if (server_) server_->Wait();
}

}  // namespace spintune
