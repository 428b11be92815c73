// Command-line checks shared by the binaries: a path flag that names a
// directory; strict numbers, durations and addresses; and CLI11's parse
// errors (a TOML key typo, a missing --config, a mistyped flag) as one line
// that names the flag or the file and the key. Exit code 2 for all of them
// (usage or bad input).
//
// Strict numbers (issue 52): CLI11 converts integers with strtoull/strtoll
// in base 0, so an overflow becomes the type's maximum, "-1" wraps to
// 2^64 - 1 and "010" is octal 8. The checks below see the text as typed
// (on the command line or in a --config file), before CLI11 converts it,
// and refuse anything but a plain decimal within the option's range; CLI11
// prefixes the option's name:
//   --max-samples: '1e23' is not a whole number in [0, 1000000000000000]
//   --listen: '127.0.0.1:99999': port 99999 is not in [0, 65535]
//
// Thread-compatible (like CLI::App).
#ifndef SPINTUNE_COMMON_CLI_CHECKS_H_
#define SPINTUNE_COMMON_CLI_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace spintune {

// A CLI11 check for options that name a file: a directory is refused
// ("/tmp is a directory, expected a file"); a missing path is allowed (the
// option may create it, or its reader says it is missing).
const CLI::Validator& NotADirectory();

// A whole number in [min, max]: decimal digits only (no sign, exponent,
// hex or octal), no overflow. Its help shows no range: say it in the
// option's description.
CLI::Validator WholeNumber(uint64_t min, uint64_t max);
// A signed integer in [min, max]: an optional '-' and decimal digits.
CLI::Validator Integer(int64_t min, int64_t max);
// A finite decimal number in [min, max] ("1.5", "2e-3"; not nan, inf or
// hex).
CLI::Validator RealNumber(double min, double max);

// One of `choices`; anything else is refused naming them, with the closest
// when it looks like a typo: "'jsn' is not one of table, json (did you
// mean json?)".
CLI::Validator OneOf(std::vector<std::string> choices);

// HOST:PORT with PORT a whole number in [0, 65535] (0: any free port), or
// unix:PATH; with `list`, one or more of them separated by commas.
CLI::Validator Address(bool list = false);

// Durations: "10ms", "2s", "1m30s", "1.5h" (absl::ParseDuration units ns,
// us, ms, s, m, h), or a plain number in `plain_unit` (seconds unless said).
struct DurationRange {
  absl::Duration min = absl::ZeroDuration();
  absl::Duration max = absl::Hours(24 * 365);
  absl::Duration plain_unit = absl::Seconds(1);
};
// The duration `text` means, or InvalidArgument quoting it ("'5x' is not a
// duration (10ms, 2s; a plain number is seconds)", "'2h' is not in [0s,
// 1h]").
absl::StatusOr<absl::Duration> ParseDurationText(absl::string_view text,
                                                 const DurationRange& range);
// Adds a duration option `name` to `app` that writes *value (which must
// outlive the parse; its value before the parse is the default shown in
// --help). The help gives the plain number's unit.
CLI::Option* AddDurationOption(CLI::App* app, const std::string& name, absl::Duration* value,
                               const DurationRange& range, const std::string& description);

// Gives every integer and floating-point option of `app` and of its
// subcommands that has none of the checks above a check of its syntax
// (whole numbers of 64 bits, finite reals): call once all options are added.
// Options narrower than 64 bits need an explicit range.
void CheckEveryNumber(CLI::App* app);

// What to do with a CLI11 parse error of `app`: --help and --version print
// and return 0; anything else prints one line "PROGRAM: ..." to stderr and
// returns 2. A key of the --config file that is no option is reported as
// "PROGRAM: FILE: unknown key 'KEY' (--help lists the options)"; an unknown
// flag or subcommand close to a known one gets "(did you mean --format?)".
int ExitForParseError(const CLI::App& app, const CLI::ParseError& e, const std::string& program);

}  // namespace spintune

#endif  // SPINTUNE_COMMON_CLI_CHECKS_H_
