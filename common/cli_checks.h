// Command-line checks shared by the binaries: a path flag that names a
// directory, and CLI11's parse errors (a TOML key typo, a missing --config)
// as one line that names the flag or the file and the key. Exit code 2 for
// all of them (usage or bad input).
//
// Thread-compatible (like CLI::App).
#ifndef SPINTUNE_COMMON_CLI_CHECKS_H_
#define SPINTUNE_COMMON_CLI_CHECKS_H_

#include <string>

#include "CLI/CLI.hpp"

namespace spintune {

// A CLI11 check for options that name a file: a directory is refused
// ("/tmp is a directory, expected a file"); a missing path is allowed (the
// option may create it, or its reader says it is missing).
const CLI::Validator& NotADirectory();

// What to do with a CLI11 parse error of `app`: --help and --version print
// and return 0; anything else prints one line "PROGRAM: ..." to stderr and
// returns 2. A key of the --config file that is no option is reported as
// "PROGRAM: FILE: unknown key 'KEY' (--help lists the options)".
int ExitForParseError(const CLI::App& app, const CLI::ParseError& e, const std::string& program);

}  // namespace spintune

#endif  // SPINTUNE_COMMON_CLI_CHECKS_H_
