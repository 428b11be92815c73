// spintune: the command-line tool. Offline fitting (tune), and the stored
// targets, policies and release headers of a tuner database (or a running
// tuner).
#include <iostream>

#include "CLI/CLI.hpp"
#include <unistd.h>

#include <cstdlib>

#include "cli/commands.h"
#include "cli/experiments_command.h"
#include "cli/extract_command.h"
#include "cli/profiles_command.h"
#include "cli/tokens_command.h"
#include "cli/verify_command.h"
#include "common/cli_checks.h"
#include "common/version.h"

namespace {

void AddTableSource(CLI::App* cmd, spintune::TableSource* source) {
  cmd->add_option("TARGET", source->target, "Agent id of a stored target");
  cmd->add_option("--version", source->version, "Table version of TARGET (default: latest)");
  cmd->add_option("--json", source->json_file, "Policy JSON file instead of a target");
  cmd->add_option("--profile", source->profile, "Stored profile instead of a target");
}

int ExitCode(const absl::Status& s) {
  if (s.ok()) return 0;
  std::cerr << "spintune: " << s.message() << "\n";
  return absl::IsInvalidArgument(s) || absl::IsNotFound(s) || absl::IsAlreadyExists(s) ? 2 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spintune: fit driver wait policies and manage stored tables."};
  app.footer(
      "Examples:\n"
      "  spintune tune --samples samples.csv --platform platform.json --format table\n"
      "  spintune --db spintune.db targets\n"
      "  spintune --db spintune.db policy board-1 --format table\n"
      "  spintune --db spintune.db header board-1 -o spintune_board1.h\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 usage or bad input.");
  app.set_version_flag("--version", spintune::Version());
  app.require_subcommand(1);
  spintune::Repository repo;
  app.add_option("--db", repo.db,
                 "Tuner database: a file (or sqlite:PATH), or postgresql://USER@HOST/DB")
      ->capture_default_str();
  app.add_option("--tuner", repo.tuner, "Ask a running tuner (host:port, or a list a:1,b:2: the first that answers) instead of --db");
  std::string token_file;
  app.add_option("--token-file", token_file, "Admin bearer token for --tuner");
  app.add_option("--tls-ca", repo.security.ca, "CA certificate of the tuner (TLS)");
  app.add_option("--tls-cert", repo.security.cert, "Client certificate (mutual TLS)");
  app.add_option("--tls-key", repo.security.key, "Key of the client certificate");

  spintune::TuneFlags tune;
  CLI::App* tune_cmd = app.add_subcommand(
      "tune", "Fit a policy table offline from a samples CSV and a platform JSON");
  tune_cmd->footer(
      "CSV columns: device,opcode,bytes,wait_ns (required); cpu_class,path,error,timeout,\n"
      "issue_ns,cpu (optional). Platform JSON: irq_cpu_ns, irq_wake_ns, poll_read_ns,\n"
      "timer_cpu_ns, timer_wake_ns. --dispatch: the IRQ dispatch CSV of `spintune extract`;\n"
      "its handler and wake times refine the irq costs as the tuner does for a replayed\n"
      "trace. See docs/csv-formats.md.\n"
      "Examples:\n"
      "  spintune tune --samples s.csv --platform p.json --objective latency\n"
      "  spintune tune --samples c.csv --dispatch d.csv --platform p.json --board my-board");
  tune_cmd->add_option("--samples", tune.samples_csv, "Completion samples CSV")
      ->required()
      ->check(spintune::NotADirectory());
  tune_cmd->add_option("--platform", tune.platform_json, "Platform costs JSON")
      ->required()
      ->check(spintune::NotADirectory());
  tune_cmd->add_option("--dispatch", tune.dispatch_csv,
                       "IRQ dispatch samples CSV (spintune extract --dispatch)")
      ->check(spintune::NotADirectory());
  tune_cmd->add_option("--board", tune.board, "Board name of the table and header "
                                              "(default: the platform JSON's board)");
  spintune::AddFitFlags(tune_cmd, &tune.fit);
  tune_cmd->add_option("--incumbent", tune.incumbent,
                       "Policy JSON of the table in force: keys keep its wait unless the fit "
                       "is cheaper by --hysteresis");
  tune_cmd->add_flag("--families", tune.families,
                     "With --format table: the cost of the best candidate of every strategy family");
  tune_cmd->add_option("--format", tune.format, "json | table")->capture_default_str();
  tune_cmd
      ->add_option("--context", tune.context,
                   "auto: split keys by the command's context (previous completion, time since "
                   "the last write, commands in flight, length) where it pays on held-out "
                   "samples; needs an issue_ns column | off")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();

  std::string targets_format = "table";
  CLI::App* targets_cmd = app.add_subcommand("targets", "List the targets a tuner knows");
  targets_cmd->footer("Example: spintune --db spintune.db targets --format json");
  targets_cmd->add_option("--format", targets_format, "json | table")->capture_default_str();

  std::string policy_target, policy_format = "table";
  uint64_t policy_version = 0;
  bool policy_families = false;
  CLI::App* policy_cmd = app.add_subcommand("policy", "Show a target's stored policy table");
  policy_cmd->footer("Example: spintune --db spintune.db policy board-1 --format json");
  policy_cmd->add_option("TARGET", policy_target, "Agent id of the target")->required();
  policy_cmd->add_option("--version", policy_version, "Table version (default: latest)");
  policy_cmd->add_option("--format", policy_format, "json | table")->capture_default_str();
  policy_cmd->add_flag("--families", policy_families, "Also the strategy family comparison");

  spintune::HeaderFlags header;
  CLI::App* header_cmd =
      app.add_subcommand("header", "Write a static C header of a policy table (release builds)");
  header_cmd->footer(
      "Examples:\n"
      "  spintune --db spintune.db header board-1 -o spintune_board1.h\n"
      "  spintune --db spintune.db header --profile rocket-v2 -o spintune_board1.h\n"
      "  spintune header --json policy.json -o table.h");
  AddTableSource(header_cmd, &header.source);
  header_cmd->add_option("-o,--output", header.output, "Output file (default: stdout)");

  spintune::BlobFlags blob;
  CLI::App* blob_cmd = app.add_subcommand(
      "blob", "Write the binary policy blob of one device (what a driver parses)");
  blob_cmd->footer(
      "Examples:\n"
      "  spintune --db spintune.db blob board-1 --device mmc0 -o mmc0.spt\n"
      "  spintune --db spintune.db blob --profile rocket-v2 --device mmc0 -o mmc0.spt\n"
      "  spintune blob --decode mmc0.spt   (check a blob as a driver does and print it)");
  AddTableSource(blob_cmd, &blob.source);
  blob_cmd->add_option("--device", blob.device, "Device (default: the table's only device)");
  blob_cmd->add_option("-o,--output", blob.output, "Output file");
  std::string blob_decode;
  blob_cmd
      ->add_option("--decode", blob_decode,
                   "Check FILE as a driver parses it and print its header and every entry "
                   "(exit 2 with the reason for a bad blob)")
      ->excludes("--device")
      ->excludes("--output");

  spintune::ProfilesFlags profiles;
  CLI::App* profiles_cmd = app.add_subcommand(
      "profiles", "Named snapshots of tables and evidence: save, list, show, diff, export, "
                  "import, rollback, delete");
  profiles_cmd->footer(
      "Examples:\n"
      "  spintune --db spintune.db profiles save rocket-v1 --target board-1 --note 'driver 1.0'\n"
      "  spintune --db spintune.db profiles list\n"
      "  spintune --db spintune.db profiles show rocket-v1\n"
      "  spintune --db spintune.db profiles diff rocket-v1 rocket-v2\n"
      "  spintune --db spintune.db profiles export rocket-v1 -o rocket-v1.json\n"
      "  spintune --db other.db profiles import rocket-v1.json --name rocket-v1-lab\n"
      "  spintune --db spintune.db profiles rollback board-1 --to rocket-v1   (or --to 3)\n"
      "  spintune --db spintune.db profiles rollback board-1 --unpin\n"
      "  spintune --db spintune.db profiles delete rocket-v1\n"
      "The file format is in docs/profiles.md.");
  profiles_cmd
      ->add_option("ACTION", profiles.action,
                   "save | list | show | diff | export | import | rollback | delete")
      ->required()
      ->check(CLI::IsMember(
          {"save", "list", "show", "diff", "export", "import", "rollback", "delete"}));
  profiles_cmd->add_option("NAME", profiles.name,
                           "Profile (save, show, diff A, export, delete), FILE (import) or "
                           "TARGET (rollback)");
  profiles_cmd->add_option("OTHER", profiles.other, "diff: profile B");
  profiles_cmd->add_option("--target", profiles.target, "save: agent id of the target");
  profiles_cmd->add_option("--version", profiles.version, "save: policy version (default: latest)");
  profiles_cmd->add_option("--note", profiles.note, "save: free text kept with the profile");
  profiles_cmd->add_option("-o,--output", profiles.output, "export: file ('-': stdout)");
  profiles_cmd->add_option("--name", profiles.rename, "import: store under this name");
  profiles_cmd->add_option("--to", profiles.to, "rollback: a version number or a profile name");
  profiles_cmd->add_flag("--unpin", profiles.unpin, "rollback: let the tuner refit again");
  profiles_cmd->add_option("--format", profiles.format, "list, show, diff: table | json")
      ->capture_default_str();

  spintune::ReportFlags report;
  CLI::App* report_cmd = app.add_subcommand(
      "report", "One self-contained HTML page showing why each wait was chosen");
  report_cmd->footer(
      "Per key: the completion-time CDF with the chosen threshold, the expected cost over\n"
      "thresholds for every strategy family with the driver default; per CPU class the IRQ\n"
      "handler and wake-up distributions; a summary sorted by expected saving.\n"
      "Examples:\n"
      "  spintune --db spintune.db report --target board-1 -o board-1.html\n"
      "  spintune --db spintune.db report --profile rocket-v1 -o rocket-v1.html");
  report_cmd->add_option("--target", report.target, "Agent id of a stored target");
  report_cmd->add_option("--version", report.version, "Table version of --target (default: latest)");
  report_cmd->add_option("--profile", report.profile, "A stored profile instead");
  report_cmd->add_option("-o,--output", report.output, "HTML file to write")->required();
  report_cmd->add_option("--max-charts", report.max_charts,
                         "Chart at most this many keys, those with the most samples (0: all)")
      ->capture_default_str();

  spintune::ExtractFlags extract;
  CLI::App* extract_cmd = app.add_subcommand(
      "extract", "Completion and IRQ dispatch samples from a kernel trace capture");
  extract_cmd->footer(
      "Reads /sys/kernel/tracing/trace or trace_pipe dumps and trace-cmd report output.\n"
      "Completions CSV: device,opcode,bytes,wait_ns,cpu_class,path,error,timeout,issue_ns,cpu;\n"
      "dispatch CSV: "
      "cpu,irq,device,handler_ns,wake_ns (docs/csv-formats.md). Lines that cannot be used are\n"
      "counted on stderr.\n"
      "Example: spintune extract --trace trace.txt --completions c.csv --dispatch d.csv --summary");
  extract_cmd->add_option("--trace", extract.trace, "Trace text file ('-' for stdin)")->required();
  extract_cmd->add_option("--pairs", extract.pairs, "JSON file of user-defined event pairs");
  extract_cmd->add_option("--irq", extract.irq, "DEVICE=IRQNAME (repeatable)");
  extract_cmd->add_option("--block-dev", extract.block_dev,
                          "MAJOR:MINOR=NAME: name block devices (default \"MAJOR:MINOR\"; "
                          "repeatable)");
  extract_cmd->add_option("--completions", extract.completions_csv, "Completion samples CSV");
  extract_cmd->add_option("--dispatch", extract.dispatch_csv, "IRQ dispatch samples CSV");
  extract_cmd->add_flag("--summary", extract.summary, "Per key and per IRQ line p50/p99");
  extract_cmd->add_option("--format", extract.format, "Summary format: table | json")
      ->capture_default_str();

  spintune::TokensFlags tokens;
  CLI::App* tokens_cmd = app.add_subcommand(
      "tokens", "Manage the tuner's bearer tokens in its database (add, list, revoke)");
  tokens_cmd->footer(
      "Examples:\n"
      "  spintune --db spintune.db tokens add board-7 --target board-7 -o board-7.token\n"
      "  spintune --db spintune.db tokens add ops --admin\n"
      "  spintune --db spintune.db tokens list\n"
      "  spintune --db spintune.db tokens revoke board-7\n"
      "A token is printed (or written) once; the database keeps only its SHA-256.");
  tokens_cmd->add_option("ACTION", tokens.action, "add | list | revoke")
      ->required()
      ->check(CLI::IsMember({"add", "list", "revoke"}));
  tokens_cmd->add_option("NAME", tokens.name, "Token name (add, revoke)");
  tokens_cmd->add_option("--target", tokens.target, "add: the agent id the token may report for");
  tokens_cmd->add_flag("--admin", tokens.admin, "add: an admin token (targets, policy RPCs)");
  tokens_cmd->add_option("-o,--output", tokens.output, "add: write the token to this file (0600)");
  tokens_cmd->add_option("--format", tokens.format, "list: table | json")->capture_default_str();

  spintune::ExperimentsFlags experiments;
  CLI::App* experiments_cmd = app.add_subcommand(
      "experiments", "Knob experiments (docs/knobs.md): list, show, abort");
  experiments_cmd->footer(
      "Examples:\n"
      "  spintune --db spintune.db experiments list\n"
      "  spintune --db spintune.db experiments show 3 --format json\n"
      "  spintune --db spintune.db experiments abort 3\n"
      "An abort is carried out by the tuner running on the database (within a second); the\n"
      "agent restores the knobs' start values.");
  experiments_cmd->add_option("ACTION", experiments.action, "list | show | abort")
      ->required()
      ->check(CLI::IsMember({"list", "show", "abort"}));
  experiments_cmd->add_option("ID", experiments.id, "Experiment id (show, abort)");
  experiments_cmd->add_option("--target", experiments.target, "list: only this agent id");
  experiments_cmd->add_option("--trials", experiments.max_trials_shown,
                              "show: the last this many trials (0: all)")
      ->capture_default_str();
  experiments_cmd->add_option("--format", experiments.format, "table | json")
      ->capture_default_str();

  spintune::VerifyFlags verify;
  CLI::App* verify_cmd = app.add_subcommand(
      "verify", "A table's predictions against what a driver measured (outcome reports)");
  verify_cmd->footer(
      "Outcome reports (docs/verification.md) come from drivers that measure their own\n"
      "waits, e.g. spintune-uring-ref --report FILE. MODE names the run: 'table' is the\n"
      "table's own; others (block, spin...) are fixed policies to compare with.\n"
      "Examples:\n"
      "  spintune --db spintune.db verify uring-ref --report table=t.json \\\n"
      "      --report block=b.json --report spin=s.json -o verification.json\n"
      "  spintune verify --json policy.json --report table=t.json --format json");
  AddTableSource(verify_cmd, &verify.source);
  verify_cmd->add_option("--report", verify.reports, "MODE=FILE: an outcome report (repeatable)")
      ->required();
  verify_cmd->add_option("-o,--output", verify.output, "Write the comparison as JSON to FILE");
  verify_cmd->add_option("--format", verify.format, "table | json")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return spintune::ExitForParseError(app, e, "spintune");
  }
  if (absl::Status s = spintune::LoadTokenFile(token_file, &repo.security); !s.ok()) {
    return ExitCode(s);
  }
  if (*tokens_cmd) {
    if (tokens.action != "list" && tokens.name.empty()) {
      return ExitCode(absl::InvalidArgumentError("tokens " + tokens.action + ": NAME is required"));
    }
    return ExitCode(spintune::RunTokens(repo.db, tokens, std::cout));
  }
  if (*tune_cmd) return ExitCode(spintune::RunTune(tune, std::cout, std::cerr));
  if (*targets_cmd) return ExitCode(spintune::RunTargets(repo, targets_format, std::cout));
  if (*policy_cmd) {
    return ExitCode(
        spintune::RunPolicy(repo, policy_target, policy_version, policy_format, policy_families,
                            std::cout));
  }
  if (*header_cmd) return ExitCode(spintune::RunHeader(repo, header, std::cout));
  if (*verify_cmd) return ExitCode(spintune::RunVerify(repo, verify, std::cout));
  if (*report_cmd) return ExitCode(spintune::RunReport(repo, report, std::cout));
  if (*blob_cmd && !blob_decode.empty()) {
    if (!blob.source.target.empty() || !blob.source.json_file.empty() ||
        !blob.source.profile.empty()) {
      return ExitCode(absl::InvalidArgumentError("blob --decode FILE takes no table source"));
    }
    return ExitCode(spintune::RunBlobDecode(blob_decode, std::cout));
  }
  if (*blob_cmd) return ExitCode(spintune::RunBlob(repo, blob, std::cout));
  if (*profiles_cmd) {
    if (!repo.tuner.empty()) {
      return ExitCode(absl::InvalidArgumentError(
          "profiles live in the tuner's database: run on its host with --db"));
    }
    return ExitCode(spintune::RunProfiles(repo.db, profiles, std::cout));
  }
  if (*experiments_cmd) {
    if (!repo.tuner.empty()) {
      return ExitCode(absl::InvalidArgumentError(
          "experiments live in the tuner's database: run on its host with --db"));
    }
    return ExitCode(spintune::RunExperiments(repo.db, experiments, std::cout));
  }
  if (*extract_cmd) {
    extract.progress = isatty(2) && std::getenv("NO_COLOR") == nullptr;
    return ExitCode(spintune::RunExtract(extract, std::cout, std::cerr));
  }
  return 2;
}
