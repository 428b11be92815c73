// TunerServer: a running tuner: the store and core, the gRPC server with the
// Tuner service and the standard health service (grpc.health.v1; "" and
// "spintune.v1.Tuner" are SERVING until shutdown), bound to an address (port
// 0 picks a free port), and optionally the metrics endpoint.
//
// Thread-safety: Start() once; Shutdown() once, from any thread.
#ifndef SPINTUNE_TUNER_TUNER_SERVER_H_
#define SPINTUNE_TUNER_TUNER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tuner/tuner_core.h"

namespace grpc {
class Server;
}

namespace spintune {

class TunerService;
class MetricsHttpServer;

class TunerServer {
 public:
  // Opens the database and listens on `listen_address` ("127.0.0.1:0").
  static absl::StatusOr<std::unique_ptr<TunerServer>> Start(const std::string& listen_address,
                                                            const TunerOptions& options);
  ~TunerServer();

  // "127.0.0.1:43211": the address actually bound.
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  TunerCore* core() { return core_.get(); }

  // Serves the counters in Prometheus text format on `address`
  // (tuner/metrics_http_server.h). Returns the bound address.
  absl::StatusOr<std::string> StartMetrics(const std::string& address);

  // Stops accepting, cancels streams still open after `deadline`, waits for
  // every call to finish, then drains the core.
  // Streams still open after `deadline` are cancelled; batches queued and
  // not yet stored are dropped unacknowledged (their agents resend them).
  // `final_counters` (optional) receives the core's counters at the end.
  void Shutdown(absl::Duration deadline, TunerCounters* final_counters = nullptr);
  // Blocks until Shutdown() completes.
  void Wait();

 private:
  TunerServer() = default;
  std::unique_ptr<TunerCore> core_;
  std::unique_ptr<TunerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsHttpServer> metrics_;
  std::string address_;
  int port_ = 0;
};

}  // namespace spintune

#endif  // SPINTUNE_TUNER_TUNER_SERVER_H_
