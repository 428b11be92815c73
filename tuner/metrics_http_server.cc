#include "tuner/metrics_http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace spintune {
namespace {

MHD_Result Reply(MHD_Connection* connection, unsigned int code, const std::string& body,
                 const char* content_type) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, "Content-Type", content_type);
  const MHD_Result r = MHD_queue_response(connection, code, response);
  MHD_destroy_response(response);
  return r;
}

MHD_Result Handle(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/,
                  size_t* upload_data_size, void** /*con_cls*/) {
  if (std::strcmp(method, "GET") != 0 && std::strcmp(method, "HEAD") != 0) {
    return Reply(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n", "text/plain");
  }
  if (*upload_data_size != 0) return MHD_NO;
  if (std::strcmp(url, "/metrics") != 0) {
    return Reply(connection, MHD_HTTP_NOT_FOUND, "metrics are at /metrics\n", "text/plain");
  }
  const auto* server = static_cast<const MetricsHttpServer*>(cls);
  return Reply(connection, MHD_HTTP_OK, server->Render(), "text/plain; version=0.0.4");
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, std::function<std::string()> render) {
  const size_t colon = address.rfind(':');
  int port = -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535 ||
      inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen: '", address, "' is not IPv4 HOST:PORT"));
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer());
  s->render_ = std::move(render);
  s->daemon_ = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, nullptr,
                                nullptr, &Handle, s.get(), MHD_OPTION_SOCK_ADDR, &addr,
                                MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT,
                                10u, MHD_OPTION_END);
  if (s->daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, " for metrics"));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(s->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  s->address_ = absl::StrCat(address.substr(0, colon), ":", info ? info->port : port);
  return s;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace spintune
