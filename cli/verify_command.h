// `spintune verify`: a table's predictions against what a driver measured
// (outcome reports, docs/verification.md), per key: predicted CPU, latency
// and cost J per request, and measured ones under the table and under any
// other modes reported (e.g. always blocking, always spinning), with 95%
// intervals and the two checks of docs/verification.md.
#ifndef SPINTUNE_CLI_VERIFY_COMMAND_H_
#define SPINTUNE_CLI_VERIFY_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/commands.h"

namespace spintune {

struct VerifyFlags {
  TableSource source;                // the table with its predictions
  std::vector<std::string> reports;  // MODE=FILE; MODE "table" is the table's own run
  std::string output;                // JSON file (empty: none)
  std::string format = "table";      // stdout: table | json
};

absl::Status RunVerify(const Repository& repo, const VerifyFlags& flags, std::ostream& out);

}  // namespace spintune

#endif  // SPINTUNE_CLI_VERIFY_COMMAND_H_
