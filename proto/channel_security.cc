#include "proto/channel_security.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"

namespace spintune {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat(what, " ", path, ": cannot open"));
  if (text->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": not a PEM file"));
  }
  return text;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTls& tls) {
  if (tls.cert.empty() && tls.key.empty()) {
    if (!tls.client_ca.empty()) {
      return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (tls.cert.empty() || tls.key.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key");
  }
  auto cert = ReadPem(tls.cert, "--tls-cert");
  if (!cert.ok()) return cert.status();
  auto key = ReadPem(tls.key, "--tls-key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options(
      tls.client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!tls.client_ca.empty()) {
    auto ca = ReadPem(tls.client_ca, "--tls-client-ca");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& address,
                                                           const ClientSecurity& security,
                                                           const grpc::ChannelArguments& args) {
  if (security.ca.empty()) {
    if (!security.cert.empty() || !security.key.empty()) {
      return absl::InvalidArgumentError("a client certificate needs --tls-ca");
    }
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  }
  grpc::SslCredentialsOptions options;
  auto ca = ReadPem(security.ca, "--tls-ca");
  if (!ca.ok()) return ca.status();
  options.pem_root_certs = *ca;
  if (!security.cert.empty() || !security.key.empty()) {
    if (security.cert.empty() || security.key.empty()) {
      return absl::InvalidArgumentError("a client certificate needs --tls-cert and --tls-key");
    }
    auto cert = ReadPem(security.cert, "--tls-cert");
    if (!cert.ok()) return cert.status();
    auto key = ReadPem(security.key, "--tls-key");
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *cert;
    options.pem_private_key = *key;
  }
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(options), args);
}

void AddCallCredentials(const ClientSecurity& security, grpc::ClientContext* context) {
  if (!security.token.empty()) context->AddMetadata("authorization", "Bearer " + security.token);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat("--token-file ", path, ": cannot open"));
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("--token-file ", path, ": empty"));
  return token;
}

absl::Status LoadTokenFile(const std::string& path, ClientSecurity* security) {
  if (path.empty()) return absl::OkStatus();
  auto token = ReadTokenFile(path);
  if (!token.ok()) return token.status();
  security->token = *token;
  return absl::OkStatus();
}

std::string BearerToken(const grpc::ServerContextBase& context) {
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return "";
  const std::string value(it->second.data(), it->second.size());
  return absl::StartsWith(value, "Bearer ") ? value.substr(7) : "";
}

bool IsLoopbackAddress(const std::string& address) {
  return absl::StartsWith(address, "127.") || absl::StartsWith(address, "localhost:") ||
         absl::StartsWith(address, "[::1]:") || address == "localhost";
}

}  // namespace spintune
