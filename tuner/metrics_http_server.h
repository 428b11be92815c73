// MetricsHttpServer: a small HTTP/1.1 server (GNU libmicrohttpd, its own
// thread) answering GET /metrics with the text `render()` returns, and 404
// for any other path, 405 for other methods. Separate from the gRPC port so
// a Prometheus scraper needs no gRPC.
//
// Thread-safety: `render` is called from the server's thread; Start() once,
// the destructor stops the server and waits for it.
#ifndef SPINTUNE_TUNER_METRICS_HTTP_SERVER_H_
#define SPINTUNE_TUNER_METRICS_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct MHD_Daemon;

namespace spintune {

class MetricsHttpServer {
 public:
  // Listens on `address` ("127.0.0.1:0", "0.0.0.0:9464"; IPv4 host:port,
  // port 0 picks a free one). InvalidArgument for a bad address,
  // Unavailable when it cannot listen.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& address, std::function<std::string()> render);
  ~MetricsHttpServer();

  // "127.0.0.1:43211": the address actually bound.
  const std::string& address() const { return address_; }

  // Called by the libmicrohttpd callback only.
  std::string Render() const { return render_(); }

 private:
  MetricsHttpServer() = default;
  std::function<std::string()> render_;
  MHD_Daemon* daemon_ = nullptr;
  std::string address_;
};

}  // namespace spintune

#endif  // SPINTUNE_TUNER_METRICS_HTTP_SERVER_H_
