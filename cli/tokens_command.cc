#include "cli/tokens_command.h"

#include "absl/strings/str_cat.h"
#include "cli/table_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "storage/store.h"

namespace spintune {

absl::Status RunTokens(const std::string& db, const TokensFlags& flags, std::ostream& out) {
  if (flags.format != "table" && flags.format != "json") {
    return absl::InvalidArgumentError("--format: table or json");
  }
  // Tokens are made before the tuner first runs: `add` may start a database.
  const OpenMode mode = flags.action == "add"      ? OpenMode::kCreate
                        : flags.action == "revoke" ? OpenMode::kExisting
                                                   : OpenMode::kReadOnly;
  SPINTUNE_ASSIGN_OR_RETURN(auto store, Store::Open(db, {}, mode));
  if (flags.action == "add") {
    SPINTUNE_ASSIGN_OR_RETURN(std::string token,
                              store->AddToken(flags.name, flags.target, flags.admin));
    if (flags.output.empty()) {
      out << token << "\n";
    } else {
      SPINTUNE_RETURN_IF_ERROR(WriteFileAtomically(flags.output, token + "\n", 0600));
      out << "token '" << flags.name << "' written to " << flags.output << "\n";
    }
    return absl::OkStatus();
  }
  if (flags.action == "revoke") return store->RevokeToken(flags.name);
  SPINTUNE_ASSIGN_OR_RETURN(auto tokens, store->ListTokens());
  if (flags.format == "json") {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& t : tokens) {
      arr.push_back({{"name", t.name}, {"target", t.target}, {"admin", t.admin},
                     {"created_at", t.created_at}, {"revoked_at", t.revoked_at}});
    }
    out << nlohmann::json{{"tokens", arr}}.dump(2) << "\n";
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows = {{"NAME", "FOR", "CREATED", "REVOKED"}};
  for (const auto& t : tokens) {
    rows.push_back({t.name, t.admin ? "admin" : "target " + t.target, t.created_at,
                    t.revoked_at.empty() ? "-" : t.revoked_at});
  }
  out << RenderColumns(rows);
  return absl::OkStatus();
}

}  // namespace spintune
