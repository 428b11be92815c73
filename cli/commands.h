// The subcommands of `spintune`. Each writes its result to `out` and returns
// a Status; main() turns it into one stderr line and the exit code
// (InvalidArgument/NotFound -> 2, anything else -> 1).
#ifndef SPINTUNE_CLI_COMMANDS_H_
#define SPINTUNE_CLI_COMMANDS_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "policy/policy_table.h"
#include "proto/channel_security.h"

#include "policy/fit_flags.h"

namespace spintune {

struct TuneFlags {
  std::string samples_csv;
  std::string platform_json;
  // IRQ dispatch CSV (`spintune extract --dispatch`): its handler and wake
  // times refine the platform's irq costs exactly as the tuner refines them
  // for a replayed trace (tuner/fit_inputs.h). Empty: the declared costs.
  std::string dispatch_csv;
  std::string board;  // names the board in the table (default: the platform's)
  FitFlags fit;
  std::string incumbent;  // policy JSON of the table in force (hysteresis)
  bool families = false;  // table format: also the family comparison
  std::string format = "json";
  // "auto": keys may get context leaves when the samples have issue times
  // (a note goes to `err` when they do not); "off": one entry per key.
  std::string context = "auto";
};
absl::Status RunTune(const TuneFlags& flags, std::ostream& out, std::ostream& err);

// Where stored targets and policies come from: a database file, or a running
// tuner's admin RPCs when `tuner` is set.
struct Repository {
  std::string db = "spintune.db";
  std::string tuner;
  ClientSecurity security;  // for --tuner: TLS files and token
};

absl::Status RunTargets(const Repository& repo, const std::string& format, std::ostream& out);
absl::Status RunPolicy(const Repository& repo, const std::string& target, uint64_t version,
                       const std::string& format, bool families, std::ostream& out);

// Where a command takes one policy table from: exactly one of a stored
// target (with a version, 0: latest), a policy JSON file or a profile.
struct TableSource {
  std::string target;
  uint64_t version = 0;
  std::string json_file;
  std::string profile;
};
absl::StatusOr<PolicyTable> LoadTable(const Repository& repo, const TableSource& source);

struct HeaderFlags {
  TableSource source;
  std::string output;  // "-" or empty: stdout
};
absl::Status RunHeader(const Repository& repo, const HeaderFlags& flags, std::ostream& out);

// The binary blob of one device (docs/policy-format.md), as a sink hands it
// to a driver.
struct BlobFlags {
  TableSource source;
  std::string device;
  std::string output;  // required: the blob is binary
};
absl::Status RunBlob(const Repository& repo, const BlobFlags& flags, std::ostream& out);
// `spintune blob --decode FILE`: checks a blob as a driver does
// (spintune_table_parse) and prints its header and every entry and context
// node. InvalidArgument with the driver's reason for a bad blob; NotFound
// when the file cannot be read.
absl::Status RunBlobDecode(const std::string& path, std::ostream& out);

// `spintune report`: the HTML report (cli/report_writer.h) of a stored
// target's table (with its current evidence) or of a profile.
struct ReportFlags {
  std::string target;
  uint64_t version = 0;
  std::string profile;
  std::string output;
  size_t max_charts = 500;  // 0: every key
};
absl::Status RunReport(const Repository& repo, const ReportFlags& flags, std::ostream& out);

}  // namespace spintune

#endif  // SPINTUNE_CLI_COMMANDS_H_
