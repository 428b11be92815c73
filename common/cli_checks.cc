#include "common/cli_checks.h"

#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"

namespace spintune {
namespace {

// The --config file given (the last one when repeated); "" when none.
std::string ConfigFile(const CLI::App& app) {
  const CLI::Option* config = app.get_config_ptr();
  if (config == nullptr || config->count() == 0) return "";
  const std::vector<std::string>& files = config->results();  // as<>() would validate again
  return files.empty() ? "" : files.back();
}

std::string OneLine(const CLI::App& app, const CLI::ParseError& e) {
  const std::string what = e.what();
  const std::string file = ConfigFile(app);
  if (dynamic_cast<const CLI::ConfigError*>(&e) != nullptr && !file.empty()) {
    absl::string_view key = what;
    if (absl::ConsumePrefix(&key, "INI was not able to parse ")) {
      if (absl::ConsumeSuffix(&key, ".++")) {  // CLI11's name for a section header
        return absl::StrCat(file, ": unknown section [", key, "] (options are top-level keys)");
      }
      return absl::StrCat(file, ": unknown key '", key, "' (--help lists the options)");
    }
    return absl::StrCat(file, ": ", what);
  }
  if (dynamic_cast<const CLI::FileError*>(&e) != nullptr && !file.empty() &&
      absl::StartsWith(what, file)) {
    const absl::Status dir = CheckNotDirectory(file);
    return absl::StrCat("--config ", dir.ok() ? file + ": cannot read (missing?)"
                                              : std::string(dir.message()));
  }
  return what;
}

}  // namespace

const CLI::Validator& NotADirectory() {
  static const CLI::Validator* check = new CLI::Validator(
      [](std::string& path) {
        const absl::Status s = CheckNotDirectory(path);
        return s.ok() ? std::string() : std::string(s.message());
      },
      "", "NOT_A_DIRECTORY");
  return *check;
}

int ExitForParseError(const CLI::App& app, const CLI::ParseError& e, const std::string& program) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  std::cerr << program << ": " << OneLine(app, e) << "\n";
  return 2;
}

}  // namespace spintune
