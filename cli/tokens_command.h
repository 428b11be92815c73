// `spintune tokens add|list|revoke`: the tuner's bearer tokens, managed in
// its database on the tuner's host (a token is shown once, stored hashed).
#ifndef SPINTUNE_CLI_TOKENS_COMMAND_H_
#define SPINTUNE_CLI_TOKENS_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace spintune {

struct TokensFlags {
  std::string action;  // add | list | revoke
  std::string name;
  std::string target;  // add: the agent id it may report for
  bool admin = false;  // add: an admin token instead
  std::string output;  // add: write the token to this file (0600) instead of stdout
  std::string format = "table";
};

absl::Status RunTokens(const std::string& db, const TokensFlags& flags, std::ostream& out);

}  // namespace spintune

#endif  // SPINTUNE_CLI_TOKENS_COMMAND_H_
