// Store: bearer tokens, kept as their SHA-256 (docs/reliability.md).
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/store.h"

namespace spintune {
namespace {

std::string Sha256Hex(const std::string& text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  std::string hex;
  for (unsigned char b : digest) absl::StrAppend(&hex, absl::Hex(b, absl::kZeroPad2));
  return hex;
}

}  // namespace

absl::StatusOr<std::string> Store::AddToken(const std::string& name, const std::string& target,
                                            bool admin) {
  if (name.empty() || name.size() > 64) {
    return absl::InvalidArgumentError("token name: 1..64 characters");
  }
  if (admin == !target.empty()) {
    return absl::InvalidArgumentError("a token is either for one target (--target) or --admin");
  }
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof(raw)) != 1) return absl::InternalError("no random bytes");
  std::string token = "st_";
  for (unsigned char b : raw) absl::StrAppend(&token, absl::Hex(b, absl::kZeroPad2));
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("INSERT INTO tokens (name, sha256, target, admin, created_at) "
                           "VALUES (?1, ?2, ?3, ?4, ?5)"));
  q->Bind(1, name).Bind(2, Sha256Hex(token)).Bind(3, target).Bind(4, int64_t{admin ? 1 : 0});
  q->Bind(5, NowRfc3339());
  absl::Status s = q->Run();
  if (absl::IsAlreadyExists(s)) {
    return absl::AlreadyExistsError(absl::StrCat("a token named '", name, "' exists"));
  }
  SPINTUNE_RETURN_IF_ERROR(s);
  return token;
}

absl::StatusOr<std::vector<TokenRecord>> Store::ListTokens() {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT name, target, admin, created_at, revoked_at FROM tokens "
                           "ORDER BY name"));
  std::vector<TokenRecord> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    out.push_back({q->ColumnText(0), q->ColumnText(1), q->ColumnInt(2) != 0, q->ColumnText(3),
                   q->ColumnText(4)});
  }
  return out;
}

absl::Status Store::RevokeToken(const std::string& name) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("UPDATE tokens SET revoked_at = ?2 WHERE name = ?1 AND revoked_at = ''"));
  q->Bind(1, name).Bind(2, NowRfc3339());
  SPINTUNE_RETURN_IF_ERROR(q->Run());
  if (db_->Changes() == 0) {
    return absl::NotFoundError(absl::StrCat("no valid token named '", name, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenRecord> Store::LookupToken(const std::string& token) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT name, target, admin, created_at, revoked_at FROM tokens "
                           "WHERE sha256 = ?1 AND revoked_at = ''"));
  q->Bind(1, Sha256Hex(token));
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  if (!row) return absl::NotFoundError("unknown or revoked token");
  return TokenRecord{q->ColumnText(0), q->ColumnText(1), q->ColumnInt(2) != 0, q->ColumnText(3),
                     q->ColumnText(4)};
}

}  // namespace spintune
