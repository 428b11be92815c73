// Transport security and credentials shared by the tuner, the agent and the
// CLI: TLS (server certificate), optional mutual TLS (client certificates
// checked against a CA), and bearer tokens in the "authorization" metadata.
//
// Thread-safe functions.
#ifndef SPINTUNE_PROTO_CHANNEL_SECURITY_H_
#define SPINTUNE_PROTO_CHANNEL_SECURITY_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace spintune {

// Server side: no cert = plaintext. client_ca set = mutual TLS: every
// client must present a certificate signed by it.
struct ServerTls {
  std::string cert;
  std::string key;
  std::string client_ca;
};

// Client side: no ca = plaintext. cert/key: the client certificate for
// mutual TLS.
struct ClientSecurity {
  std::string ca;
  std::string cert;
  std::string key;
  std::string token;  // sent as "authorization: Bearer TOKEN" (empty: none)
};

// NotFound/InvalidArgument naming the file for unreadable or half-given
// files.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTls& tls);
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const std::string& address, const ClientSecurity& security,
    const grpc::ChannelArguments& args = grpc::ChannelArguments());
// Adds the token of `security` to a call.
void AddCallCredentials(const ClientSecurity& security, grpc::ClientContext* context);

// The token in a file (surrounding whitespace dropped). NotFound, or
// InvalidArgument for an empty file.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);
// Sets security->token from the file `path` (--token-file); nothing when
// `path` is empty. Errors as ReadTokenFile().
absl::Status LoadTokenFile(const std::string& path, ClientSecurity* security);
// The bearer token of a call ("" when none).
std::string BearerToken(const grpc::ServerContextBase& context);
// True for 127.0.0.0/8, ::1 and localhost listen addresses.
bool IsLoopbackAddress(const std::string& address);

}  // namespace spintune

#endif  // SPINTUNE_PROTO_CHANNEL_SECURITY_H_
