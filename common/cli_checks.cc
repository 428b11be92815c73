#include "common/cli_checks.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"

namespace spintune {
namespace {

// The name of every check below: CheckEveryNumber skips options that have one.
constexpr char kStrictNumber[] = "spintune-strict-number";

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(c); });
}

// "1e6" rather than "1e+06"; integers as integers.
std::string FormatReal(double v) {
  if (std::abs(v) < 1e6 && v == std::floor(v)) return absl::StrFormat("%.0f", v);
  std::string s = absl::StrFormat("%g", v);
  for (const char* from : {"e+0", "e+"}) {
    const size_t at = s.find(from);
    if (at != std::string::npos) {
      s.replace(at, std::string(from).size(), "e");
      break;
    }
  }
  return s;
}

bool HasStrictCheck(CLI::Option* opt) {
  try {
    opt->get_validator(kStrictNumber);
    return true;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

// The --config file given (the last one when repeated); "" when none.
std::string ConfigFile(const CLI::App& app) {
  const CLI::Option* config = app.get_config_ptr();
  if (config == nullptr || config->count() == 0) return "";
  const std::vector<std::string>& files = config->results();  // as<>() would validate again
  return files.empty() ? "" : files.back();
}

// Edit distance (insertions, deletions, substitutions, adjacent swaps).
size_t Distance(absl::string_view a, absl::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The candidate closest to `typed` when it is close enough to be a typo
// (at most a third of its letters off, prefixes count); "" otherwise.
std::string Closest(absl::string_view typed, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(1, typed.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = Distance(typed, c);
    if (typed.size() >= 4 && absl::StartsWith(c, typed)) d = std::min<size_t>(d, 1);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

// The subcommands given on the command line, outermost first (`app` itself
// first).
std::vector<const CLI::App*> ParsedChain(const CLI::App& app) {
  std::vector<const CLI::App*> chain = {&app};
  while (true) {
    const std::vector<CLI::App*> parsed = chain.back()->get_subcommands();
    if (parsed.empty()) return chain;
    chain.push_back(parsed.back());
  }
}

std::vector<std::string> LongNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& n : opt->get_lnames()) names.push_back("--" + n);
  }
  return names;
}

std::vector<std::string> CommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

// An ExtrasError or a missing subcommand as one line with a suggestion:
// "--formt: no such option of 'spintune policy' (did you mean --format?)".
std::string UnexpectedArguments(const CLI::App& app, const std::vector<std::string>& args,
                                const std::string& program) {
  const std::vector<const CLI::App*> chain = ParsedChain(app);
  const CLI::App& innermost = *chain.back();
  std::string where = program;
  for (size_t i = 1; i < chain.size(); ++i) absl::StrAppend(&where, " ", chain[i]->get_name());
  for (const auto& arg : args) {
    if (!absl::StartsWith(arg, "-") || arg == "-") continue;
    const std::string flag = arg.substr(0, arg.find('='));
    std::vector<std::string> candidates;
    for (const CLI::App* a : chain) {
      for (auto& n : LongNames(*a)) candidates.push_back(std::move(n));
    }
    const std::string guess = absl::StartsWith(flag, "--") ? Closest(flag, candidates) : "";
    return absl::StrCat(flag, ": no such option of '", where, "'",
                        guess.empty() ? " (--help lists them)"
                                      : absl::StrCat(" (did you mean ", guess, "?)"));
  }
  const std::vector<std::string> commands = CommandNames(innermost);
  if (!commands.empty() && !args.empty()) {
    const std::string guess = Closest(args.front(), commands);
    return absl::StrCat("'", args.front(), "' is not a command of '", where, "'",
                        guess.empty() ? absl::StrCat(" (", where, " --help lists them)")
                                      : absl::StrCat(" (did you mean ", guess, "?)"));
  }
  return absl::StrCat(args.size() > 1 ? "unexpected arguments: " : "unexpected argument: ",
                      absl::StrJoin(args, " "));
}

std::string OneLine(const CLI::App& app, const CLI::ParseError& e, const std::string& program) {
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
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    absl::string_view rest = what;
    if (absl::ConsumePrefix(&rest, "The following arguments were not expected: ") ||
        absl::ConsumePrefix(&rest, "The following argument was not expected: ")) {
      std::vector<std::string> args = absl::StrSplit(rest, ' ', absl::SkipEmpty());
      std::reverse(args.begin(), args.end());  // CLI11 lists them last first
      return UnexpectedArguments(app, args, program);
    }
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr &&
      absl::StartsWith(what, "A subcommand is required")) {
    const std::vector<std::string> rest = app.remaining();
    if (!rest.empty()) return UnexpectedArguments(app, rest, program);
    return absl::StrCat("a command is required (", program, " --help lists them)");
  }
  absl::string_view conversion = what;
  if (absl::ConsumePrefix(&conversion, "Could not convert: ")) {
    // A value a check let through but the option's type cannot hold.
    const size_t eq = conversion.find(" = ");
    if (eq != absl::string_view::npos) {
      return absl::StrCat(conversion.substr(0, eq), ": '", conversion.substr(eq + 3),
                          "' is out of range");
    }
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

CLI::Validator WholeNumber(uint64_t min, uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) {
        uint64_t v = 0;
        if (AllDigits(text) && absl::SimpleAtoi(text, &v) && v >= min && v <= max) {
          return std::string();
        }
        return absl::StrCat("'", text, "' is not a whole number in [", min, ", ", max, "]");
      },
      "", kStrictNumber);
}

CLI::Validator Integer(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) {
        absl::string_view digits = text;
        absl::ConsumePrefix(&digits, "-");
        int64_t v = 0;
        if (AllDigits(digits) && absl::SimpleAtoi(text, &v) && v >= min && v <= max) {
          return std::string();
        }
        return absl::StrCat("'", text, "' is not an integer in [", min, ", ", max, "]");
      },
      "", kStrictNumber);
}

CLI::Validator RealNumber(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) {
        const bool decimal =
            !text.empty() &&
            std::any_of(text.begin(), text.end(), [](char c) { return absl::ascii_isdigit(c); }) &&
            std::all_of(text.begin(), text.end(), [](char c) {
              return absl::ascii_isdigit(c) || c == '.' || c == 'e' || c == 'E' || c == '-' ||
                     c == '+';
            });
        double v = 0;
        if (decimal && absl::SimpleAtod(text, &v) && std::isfinite(v) && v >= min && v <= max) {
          return std::string();
        }
        if (min == -std::numeric_limits<double>::max() &&
            max == std::numeric_limits<double>::max()) {
          return absl::StrCat("'", text, "' is not a finite number");
        }
        return absl::StrCat("'", text, "' is not a number in [", FormatReal(min), ", ",
                            FormatReal(max), "]");
      },
      "", kStrictNumber);
}

CLI::Validator OneOf(std::vector<std::string> choices) {
  return CLI::Validator(
      [choices](std::string& text) {
        if (std::find(choices.begin(), choices.end(), text) != choices.end()) return std::string();
        const std::string guess = Closest(text, choices);
        return absl::StrCat("'", text, "' is not one of ", absl::StrJoin(choices, ", "),
                            guess.empty() ? "" : absl::StrCat(" (did you mean ", guess, "?)"));
      },
      "", "spintune-one-of");
}

CLI::Validator Address(bool list) {
  return CLI::Validator(
      [list](std::string& text) -> std::string {
        std::vector<absl::string_view> parts;
        if (list) {
          parts = absl::StrSplit(text, ',');
        } else {
          parts.push_back(text);
        }
        for (absl::string_view a : parts) {
          a = absl::StripAsciiWhitespace(a);
          if (absl::StartsWith(a, "unix:") && a.size() > 5) continue;
          const size_t colon = a.rfind(':');
          if (colon == absl::string_view::npos || colon == 0) {
            return absl::StrCat("'", a, "' is not HOST:PORT");
          }
          const absl::string_view port = a.substr(colon + 1);
          uint32_t p = 0;
          if (!AllDigits(port) || port.size() > 5 || !absl::SimpleAtoi(port, &p) || p > 65535) {
            return absl::StrCat("'", a, "': port ",
                                port.empty() ? absl::string_view("(none)") : port,
                                " is not in [0, 65535]");
          }
        }
        return "";
      },
      "", "spintune-address");
}

absl::StatusOr<absl::Duration> ParseDurationText(absl::string_view text,
                                                 const DurationRange& range) {
  const std::string unit = absl::FormatDuration(range.plain_unit);
  const std::string plain =
      range.plain_unit == absl::Seconds(1) ? "seconds" : absl::StrCat("in ", unit);
  absl::Duration d;
  const absl::string_view t = absl::StripAsciiWhitespace(text);
  const bool number =
      !t.empty() && std::all_of(t.begin(), t.end(), [](char c) {
        return absl::ascii_isdigit(c) || c == '.';
      });
  double v = 0;
  if (number) {
    if (!absl::SimpleAtod(t, &v) || !std::isfinite(v) || v > 1e15) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a duration"));
    }
    d = range.plain_unit * v;
  } else if (!absl::ParseDuration(t, &d) || d == absl::InfiniteDuration() ||
             d == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' is not a duration (10ms, 2s, 1m30s; a plain number is ", plain, ")"));
  }
  if (d < range.min || d > range.max) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not in [",
                                                   absl::FormatDuration(range.min), ", ",
                                                   absl::FormatDuration(range.max), "]"));
  }
  return d;
}

CLI::Option* AddDurationOption(CLI::App* app, const std::string& name, absl::Duration* value,
                               const DurationRange& range, const std::string& description) {
  const std::string plain = range.plain_unit == absl::Seconds(1)
                                ? "seconds"
                                : absl::StrCat("in ", absl::FormatDuration(range.plain_unit));
  CLI::Option* opt = app->add_option_function<std::string>(
      name,
      [value, range](const std::string& text) {
        auto d = ParseDurationText(text, range);
        if (d.ok()) *value = *d;  // the check below ran first
      },
      absl::StrCat(description, " (10ms, 2s; a plain number is ", plain, ")"));
  opt->check(CLI::Validator(
      [range](std::string& text) {
        auto d = ParseDurationText(text, range);
        return d.ok() ? std::string() : std::string(d.status().message());
      },
      "", kStrictNumber));
  opt->type_name("DURATION");
  opt->default_str(absl::FormatDuration(*value));
  return opt;
}

void CheckEveryNumber(CLI::App* app) {
  for (CLI::Option* opt : app->get_options()) {
    if (opt->get_expected_max() == 0 || HasStrictCheck(opt)) continue;  // a flag, or checked
    const std::string type = opt->get_type_name();
    if (absl::StartsWith(type, "UINT")) {
      opt->check(WholeNumber(0, std::numeric_limits<uint64_t>::max()));
    } else if (absl::StartsWith(type, "INT")) {
      opt->check(Integer(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    } else if (absl::StartsWith(type, "FLOAT")) {
      opt->check(RealNumber(-std::numeric_limits<double>::max(),
                            std::numeric_limits<double>::max()));
    }
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    CheckEveryNumber(sub);
  }
}

int ExitForParseError(const CLI::App& app, const CLI::ParseError& e, const std::string& program) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  std::cerr << program << ": " << OneLine(app, e, program) << "\n";
  return 2;
}

}  // namespace spintune
