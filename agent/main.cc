// spintune-agent: measures a board (live tracefs capture, a trace replay, a
// CSV or a simulated board) and streams the samples to spintune-tuner;
// applies the tables the tuner pushes back.
#include <unistd.h>

#include <iostream>
#include <optional>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "agent/agent.h"
#include "agent/board_model.h"
#include "agent/host_probe.h"
#include "agent/knobs/knob_controller.h"
#include "agent/knobs/knob_only_source.h"
#include "agent/outcome_report_source.h"
#include "absl/strings/strip.h"
#include "common/cli_checks.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/process_setup.h"
#include "common/signal_waiter.h"
#include "common/version.h"
#include "policy/outcome_report.h"
#include "policy/policy_json.h"
#include "proto/channel_security.h"

namespace {

struct Flags {
  std::string tuner = "127.0.0.1:50051";
  std::string agent_id;
  std::string source;
  std::string knobs;
  std::string sink = "none";
  uint32_t driver_blob_format = 0;  // 0: what the sink says
  uint64_t seed = 1;
  double sim_timer_wake_factor = 1;
  uint64_t max_samples = 0;
  size_t batch_size = 512;
  double rate = 0;
  std::string record;
  std::string platform;
  std::string pairs;
  std::vector<std::string> irq;
  std::vector<std::string> block_dev;
  std::vector<std::string> outcomes;
  std::string capture = "auto";
  std::string irq_costs = "trace";
  std::string histogram_wire = "arrays";
  uint32_t capture_samples = 0;
  std::string wake_windows = "1s/10s";
  std::string capture_windows = "all";
  bool probe = false;
  uint64_t max_spin_ns = 0;
  std::string token_file;
  spintune::ClientSecurity security;
  std::string spool_dir = "default";
  uint64_t spool_max_mb = 64;
  std::string allow_strategies;
  std::string state_dir = "/var/lib/spintune";
  double give_up_after_s = 0;
  std::string log_level = "info";
  std::string log_format = "text";
  bool list_boards = false;
  std::string format = "table";
};

int ListBoards(const std::string& format) {
  if (format == "json") {
    nlohmann::json boards = nlohmann::json::array();
    for (const auto& b : spintune::BoardCatalog()) {
      boards.push_back({{"name", b.name}, {"summary", b.summary}, {"source", b.sources}});
    }
    std::cout << nlohmann::json{{"boards", boards}}.dump(2) << "\n";
    return 0;
  }
  if (format != "table") {
    std::cerr << "spintune-agent: --format: table or json\n";
    return 2;
  }
  for (const auto& b : spintune::BoardCatalog()) {
    std::cout << b.name << "\n    " << b.summary << "\n    source: " << b.sources << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  spintune::SetUpProcess();  // before any thread starts
  Flags f;
  CLI::App app{"spintune-agent: measure a board's command completion times and stream them "
               "to spintune-tuner; apply the policy tables it pushes back."};
  app.footer(
      "Examples:\n"
      "  spintune-agent --config /etc/spintune/agent.toml\n"
      "  spintune-agent --list-boards\n"
      "  spintune-agent --probe\n"
      "  sudo spintune-agent --tuner 127.0.0.1:50051 --source tracefs:vda --sink none\n"
      "  sudo spintune-agent --tuner 127.0.0.1:50051 --source tracefs:vda --capture raw\n"
      "  spintune-agent --source replay:trace.txt --platform board.json --block-dev 179:0=mmcblk0\n"
      "  spintune-agent --tuner 127.0.0.1:50051 --source sim:litex-rocket-50mhz-slowcard \\\n"
      "      --sink file:/tmp/spintune-{device}.bin --max-samples 20000\n"
      "  spintune-agent --tuner 127.0.0.1:50051 --knobs sim:ahci-sunxi-a20-txts5-rxts6\n"
      "  sudo spintune-agent --tuner 127.0.0.1:50051 --knobs vda-queue.json\n"
      "SIGINT/SIGTERM: sends what was measured (the histograms of the interval in progress\n"
      "too) and waits for the tuner's acks (5 s at most with a spool); a second signal stops at\n"
      "once.\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 usage or bad input, 3 finished but some samples\n"
      "were not stored (refused by the tuner or dropped from a full spool; see the last line).");
  app.set_version_flag("--version", spintune::Version());
  // Any long option may come from a TOML file (docs/configuration.md);
  // the command line overrides it.
  app.set_config("--config", "", "Read options from this TOML file (flags override it)")
      ->check(spintune::NotADirectory());
  app.allow_config_extras(CLI::config_extras_mode::error);  // a typo is an error
  app.add_option("--tuner", f.tuner,
                 "Tuner address host:port, or a list a:1,b:2 of tuners sharing one database: "
                 "after a failed session the agent moves on to the next")
      ->capture_default_str();
  app.add_option("--agent-id", f.agent_id,
                 "Stable identity of this agent (default: HOSTNAME/SOURCE)");
  app.add_option("--source", f.source,
                 "Where samples come from: tracefs[:DEV,DEV] (live, root), replay:FILE (a "
                 "trace capture), csv:FILE, or sim:BOARD");
  app.add_option("--knobs", f.knobs,
                 "Knobs to experiment with: a declaration JSON (docs/knobs.md) or sim:BOARD (a "
                 "simulated ahci_sunxi board); without --source the agent only runs experiments");
  app.add_option("--platform", f.platform,
                 "Platform costs JSON (docs/csv-formats.md); required for csv: and replay:, "
                 "tracefs probes the host without it")
      ->check(spintune::NotADirectory());
  app.add_option("--pairs", f.pairs,
                 "JSON file of user-defined start/end event pairs (replay:, tracefs)")
      ->check(spintune::NotADirectory());
  app.add_option("--outcomes", f.outcomes,
                 "An outcome report a driver wrote (docs/verification.md; repeatable): sent "
                 "after the last batch of a csv: or replay: source, or first with tracefs, for "
                 "the tuner to verify the version the driver waited by against the one before")
      ->check(spintune::NotADirectory());
  app.add_option("--irq", f.irq, "DEVICE=IRQNAME: whose IRQ line it is (repeatable)");
  app.add_option("--block-dev", f.block_dev,
                 "MAJOR:MINOR=NAME: name the block devices of a replayed trace (repeatable)");
  app.add_option("--capture", f.capture,
                 "tracefs: auto | bpf (in-kernel histograms) | raw (binary trace buffers) | "
                 "text (trace_pipe); auto takes the first this kernel allows")
      ->check(CLI::IsMember({"auto", "bpf", "raw", "text"}))
      ->capture_default_str();
  app.add_option("--irq-costs", f.irq_costs,
                 "Where the tuner takes the IRQ path's costs from: trace (the IRQ handler and "
                 "wake-up times this agent measures, which override --platform's) or platform "
                 "(--platform's; measured times are not sent: for a platform file the driver "
                 "measured with no tracer attached)")
      ->check(CLI::IsMember({"trace", "platform"}))
      ->capture_default_str();
  app.add_option("--histogram-wire", f.histogram_wire,
                 "How histogram deltas (tracefs) go on the wire: arrays (every tuner reads "
                 "them) or bytes (half the bytes, and less of the tuner's CPU per batch; only "
                 "to tuners that say they read them: the agent sends nothing to an older one)")
      ->check(CLI::IsMember({"arrays", "bytes"}))
      ->capture_default_str();
  app.add_option("--capture-samples", f.capture_samples,
                 "tracefs: send every Nth completion as an individual sample instead of in "
                 "the histogram batches (for --record and exact replays; 1: all, with raw's "
                 "and text's IRQ dispatch samples too; 0: histograms only)")
      ->capture_default_str();
  app.add_option("--wake-windows", f.wake_windows,
                 "tracefs: measure wake latencies for ON of every EVERY (ON/EVERY, e.g. "
                 "1s/10s) or all the time (all): raw and text trace the sched events only "
                 "then (two thirds of the events a request makes), bpf attaches its "
                 "sched_switch program only then; completions and IRQ handler times are "
                 "measured all the time. --record takes all")
      ->capture_default_str();
  app.add_option("--capture-windows", f.capture_windows,
                 "tracefs: capture for ON of every EVERY (ON/EVERY, e.g. 1s/10s: a tenth of "
                 "the requests at about a tenth of the cost; windows start at multiples of "
                 "EVERY on the wall clock) or all the time (all); between windows bpf's "
                 "programs are detached and raw's and text's events disabled")
      ->capture_default_str();
  app.add_option("--max-spin-ns", f.max_spin_ns,
                 "Refuse pushed tables that busy-wait longer than this (0: no local limit)")
      ->capture_default_str();
  app.add_option("--allow-strategies", f.allow_strategies,
                 "Refuse pushed tables using other strategies (comma list of irq, spin, "
                 "spin_then_irq, sleep_then_spin, poll_sleep; default: all)");
  app.add_flag("--probe", f.probe,
               "Measure this host's platform costs (IRQ handler and wake from a live trace "
               "of real I/O when root), print them and exit");
  app.add_option("--sink", f.sink,
                 "Where pushed tables go: file:PATH, attr:PATH, shm:NAME (each may hold "
                 "{device}) or none")
      ->capture_default_str();
  app.add_option("--driver-blob-format", f.driver_blob_format,
                 "The highest policy blob format the drivers behind --sink read, told to the "
                 "tuner (3: A/B trials, docs/verification.md). Default: attr: asks the driver "
                 "(its max_blob_format file beside the attribute, else 2); file: and shm: 2 (the "
                 "agent cannot ask their readers); none: 3")
      ->check(CLI::Range(2, 3));
  app.add_option("--seed", f.seed, "Seed of simulated sources")->capture_default_str();
  app.add_option("--sim-timer-wake-factor", f.sim_timer_wake_factor,
                 "sim: the board's true timer oversleep is its declared one times this (a "
                 "wrong platform model, to watch verification roll a table back)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  app.add_option("--max-samples", f.max_samples,
                 "Stop after this many completion samples, flush, wait for the final table "
                 "(0: run until SIGINT/SIGTERM). Live sources: samples this run measures. "
                 "sim:, csv:, replay: (the same stream every run): where the stream ends; a "
                 "restarted agent id skips what it sent before and sends the rest")
      ->capture_default_str();
  app.add_option("--batch-size", f.batch_size, "Completion samples per batch")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--rate", f.rate,
                 "Pace a simulated source to this many samples per second (0: unpaced)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--record", f.record, "Append every sent completion sample to this CSV")
      ->check(spintune::NotADirectory());
  app.add_option("--state-dir", f.state_dir,
                 "Keep the last good table here and re-apply it at start (empty: don't)")
      ->capture_default_str();
  app.add_option("--token-file", f.token_file,
                 "File holding this agent's bearer token (spintune tokens add)")
      ->check(spintune::NotADirectory());
  app.add_option("--tls-ca", f.security.ca, "CA certificate that signed the tuner's (enables TLS)")
      ->check(spintune::NotADirectory());
  app.add_option("--tls-cert", f.security.cert, "Client certificate for mutual TLS")
      ->check(spintune::NotADirectory());
  app.add_option("--tls-key", f.security.key, "Key of the client certificate")
      ->check(spintune::NotADirectory());
  app.add_option("--spool-dir", f.spool_dir,
                 "Keep unacknowledged batches here across outages and restarts (default: "
                 "STATE-DIR/spool-AGENT-ID; empty: memory only)");
  app.add_option("--spool-max-mb", f.spool_max_mb,
                 "Spool size limit; beyond it the oldest batches are dropped and reported")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--give-up-after", f.give_up_after_s,
                 "Exit with an error after this many seconds without a tuner (0: never)")
      ->capture_default_str();
  app.add_option("--log-format", f.log_format, "text | json (one object per line)")
      ->capture_default_str();
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error|off")
      ->capture_default_str();
  app.add_flag("--list-boards", f.list_boards, "List the simulated boards and exit");
  app.add_option("--format", f.format,
                 "--list-boards and --probe output: table | json (--probe: a platform file)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return spintune::ExitForParseError(app, e, "spintune-agent");
  }
  if (f.list_boards) return ListBoards(f.format);
  if (f.probe) {
    if (!f.source.empty()) {
      std::cerr << "spintune-agent: --probe runs alone (a tracefs source without --platform "
                   "probes by itself)\n";
      return 2;
    }
    if (f.format != "table" && f.format != "json") {
      std::cerr << "spintune-agent: --format: table or json\n";
      return 2;
    }
    const spintune::HostProbeResult probe = spintune::ProbeHost(spintune::HostProbeOptions{});
    // JSON is a platform file for --platform (docs/csv-formats.md).
    std::cout << (f.format == "json" ? spintune::CostsToJson(probe.Costs()).dump(2) + "\n"
                                     : probe.Report());
    return 0;
  }
  if (f.source.empty() && f.knobs.empty()) {
    std::cerr << "spintune-agent: --source is required (e.g. sim:microwatt-100mhz)\n";
    return 2;
  }
  for (const char* prefix : {"csv:", "replay:"}) {  // sources that read a file
    absl::string_view path = f.source;
    if (!absl::ConsumePrefix(&path, prefix)) continue;
    if (absl::Status s = spintune::CheckNotDirectory(std::string(path)); !s.ok()) {
      std::cerr << "spintune-agent: --source " << f.source << ": " << s.message() << "\n";
      return 2;
    }
  }
  std::optional<spintune::KnobDeclaration> knobs;
  if (!f.knobs.empty()) {
    auto declaration = spintune::LoadKnobDeclaration(f.knobs);
    if (!declaration.ok()) {
      std::cerr << "spintune-agent: --knobs: " << declaration.status().message() << "\n";
      return 2;
    }
    knobs = std::move(*declaration);
  }
  absl::Status s = spintune::InitLogging("agent", f.log_level, f.log_format);
  if (!s.ok()) {
    std::cerr << "spintune-agent: " << s.message() << "\n";
    return 2;
  }
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  if (f.agent_id.empty()) {
    f.agent_id = std::string(host) + "/" + (f.source.empty() ? "knobs:" + f.knobs : f.source);
  }
  spintune::SourceOptions source_options;
  source_options.seed = f.seed;
  source_options.sim_timer_wake_factor = f.sim_timer_wake_factor;
  source_options.platform = f.platform;
  source_options.pairs = f.pairs;
  source_options.irq = f.irq;
  source_options.block_dev = f.block_dev;
  source_options.capture = f.capture;
  // --record needs individual samples: the capture then sends them all.
  source_options.capture_samples = !f.record.empty() && f.capture_samples == 0 ? 1 : f.capture_samples;
  source_options.wake_windows = f.record.empty() ? f.wake_windows : "all";
  source_options.capture_windows = f.capture_windows;
  auto source = f.source.empty()
                    ? absl::StatusOr<std::unique_ptr<spintune::SampleSource>>(
                          std::make_unique<spintune::KnobOnlySource>(*knobs, host))
                    : spintune::MakeSampleSource(f.source, source_options);
  if (!source.ok()) {
    std::cerr << "spintune-agent: --source: " << source.status().message() << "\n";
    return absl::IsInvalidArgument(source.status()) || absl::IsNotFound(source.status()) ? 2 : 1;
  }
  if (!f.outcomes.empty()) {
    std::vector<spintune::OutcomeReport> reports;
    for (const auto& path : f.outcomes) {
      auto report = spintune::ReadOutcomeReport(path);
      if (!report.ok()) {
        std::cerr << "spintune-agent: --outcomes: " << report.status().message() << "\n";
        return 2;
      }
      reports.push_back(std::move(*report));
    }
    const bool ends = absl::StartsWith(f.source, "csv:") || absl::StartsWith(f.source, "replay:");
    source = spintune::OutcomeReportSource::Wrap(std::move(*source), ends, std::move(reports));
    if (!source.ok()) {
      std::cerr << "spintune-agent: --outcomes: " << source.status().message() << "\n";
      return 2;
    }
  }
  spintune::v1::Hello described;
  (*source)->Describe(&described);
  std::vector<std::string> devices;
  for (const auto& d : described.devices()) devices.push_back(d.name());
  auto sink = spintune::MakePolicySink(f.sink, devices, f.driver_blob_format);
  if (!sink.ok()) {
    std::cerr << "spintune-agent: --sink: " << sink.status().message() << "\n";
    return 2;
  }

  spintune::AgentOptions options;
  options.security = f.security;
  if (absl::Status s = spintune::LoadTokenFile(f.token_file, &options.security); !s.ok()) {
    std::cerr << "spintune-agent: " << s.message() << "\n";
    return 2;
  }
  options.bounds.max_spin_ns = f.max_spin_ns;
  options.send_dispatch = f.irq_costs == "trace";
  options.histogram_bytes = f.histogram_wire == "bytes";
  if (!f.allow_strategies.empty()) {
    auto allowed = spintune::ParseStrategyList(f.allow_strategies);
    if (!allowed.ok()) {
      std::cerr << "spintune-agent: --allow-strategies: " << allowed.status().message() << "\n";
      return 2;
    }
    options.bounds.allowed = *allowed;
  }
  options.tuner_address = f.tuner;
  options.agent_id = f.agent_id;
  options.max_samples = f.max_samples;
  options.batch_size = f.batch_size;
  options.record_csv = f.record;
  options.samples_per_second = f.rate;
  options.state_dir = f.state_dir;
  if (f.spool_dir == "default") {
    f.spool_dir.clear();
    if (!f.state_dir.empty()) {
      f.spool_dir = f.state_dir + "/spool-" + spintune::SafeFileName(f.agent_id);
    }
  }
  options.spool_dir = f.spool_dir;
  options.spool_max_bytes = f.spool_max_mb << 20;
  options.give_up_after = absl::Seconds(f.give_up_after_s);
  if (knobs) {
    // Before anything else: an experiment a crash interrupted gets its
    // start values back.
    auto controller = spintune::KnobController::Create(
        std::move(*knobs),
        f.state_dir.empty() ? "" : f.state_dir + "/" + spintune::SafeFileName(f.agent_id) + ".knobs.json",
        f.seed);
    absl::Status recovered = controller.ok() ? (*controller)->Recover() : controller.status();
    if (!recovered.ok()) {
      std::cerr << "spintune-agent: --knobs: " << recovered.message() << "\n";
      return 1;
    }
    options.knobs = std::move(*controller);
  }
  spintune::Agent agent(options, std::move(*source), std::move(*sink));
  int stops = 0;  // signals so far (only the waiting thread counts)
  spintune::SignalWaiter signals([&agent, &stops](int sig) {
    if (++stops == 1) {
      spintune::Logger().info("signal {}: flushing and stopping (again: stop at once)", sig);
    } else {
      spintune::Logger().info("signal {} again: stopping without waiting for acks", sig);
    }
    agent.Stop();
  });
  spintune::Logger().info("agent id={} source={} tuner={}", f.agent_id,
                          f.source.empty() ? "none (knobs only)" : f.source, f.tuner);
  s = agent.Run();
  const spintune::AgentStats st = agent.stats();
  spintune::Logger().info(
      "done samples={} skipped={} batches_acked={} duplicates={} rejected={} "
      "rejected_samples={} spool_dropped={} spool_dropped_samples={} reconnects={} "
      "applied_version={} tables_refused={} table_write_failures={}",
      st.samples_generated - st.samples_skipped, st.samples_skipped, st.batches_acked,
      st.duplicate_acks, st.batches_rejected, st.samples_rejected, st.spool_dropped_batches,
      st.spool_dropped_samples, st.reconnects, st.applied_version, st.tables_refused,
      st.table_write_failures);
  if (s.ok() && st.applied_version == 0 && st.tables_refused + st.table_write_failures > 0) {
    // Tables came and none reached the driver: not a success.
    s = absl::FailedPreconditionError(absl::StrCat(
        "no table was applied: ", st.tables_refused, " refused, ", st.table_write_failures,
        " failed to write (last: ", st.last_table_error, ")"));
  }
  if (!s.ok()) {
    std::cerr << "spintune-agent: " << s.message() << "\n";
    if (absl::IsDataLoss(s)) return 3;
    return absl::IsInvalidArgument(s) ? 2 : 1;
  }
  return 0;
}
