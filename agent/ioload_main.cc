// spintune-ioload: the bundled disk load of `make demo-live` and of the
// live tests: O_DIRECT reads and writes of several sizes plus fsyncs on a
// scratch file (agent/io_load.h).
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "agent/io_load.h"
#include "common/cli_checks.h"
#include "common/process_setup.h"
#include "common/signal_waiter.h"
#include "common/version.h"

int main(int argc, char** argv) {
  spintune::SetUpProcess();  // before any thread starts
  spintune::IoLoadOptions o;
  absl::Duration duration = absl::Seconds(5);
  uint64_t file_mb = 64;
  CLI::App app{"spintune-ioload: O_DIRECT reads and writes of several sizes plus fsyncs on a "
               "scratch file, for measuring a disk with spintune-agent --source tracefs."};
  app.footer("Examples:\n  spintune-ioload --file /var/tmp/load.bin --duration 10 --threads 4\n"
             "Exit codes: 0 ok, 1 I/O failure, 2 usage.");
  app.set_version_flag("--version", spintune::Version());
  app.add_option("--file", o.path, "Scratch file (created; removed afterwards)")
      ->capture_default_str();
  app.add_option("--file-mb", file_mb, "Scratch file size in MiB, in [1, 1048576]")
      ->check(spintune::WholeNumber(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--sizes", o.sizes, "Request sizes in bytes (multiples of 4096)")
      ->delimiter(',')
      ->check(spintune::WholeNumber(4096, uint64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--write-share", o.write_share, "Share of writes, in [0, 1]")
      ->check(spintune::RealNumber(0, 1))
      ->capture_default_str();
  app.add_option("--fsync-every", o.fsync_every, "Writes per fdatasync (0: never)")
      ->check(spintune::WholeNumber(0, 1'000'000))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "Threads issuing requests, in [1, 64]")
      ->check(spintune::WholeNumber(1, 64))
      ->capture_default_str();
  app.add_option("--rate", o.requests_per_second, "Requests per second, all threads (0: max)")
      ->check(spintune::RealNumber(0, 1e9))
      ->capture_default_str();
  spintune::AddDurationOption(&app, "--duration", &duration,
                              {absl::Milliseconds(10), absl::Hours(24)},
                              "How long to run, in [10ms, 24h]");
  app.add_option("--seed", o.seed, "Random seed")->capture_default_str();
  app.add_flag("--keep", o.keep_file, "Keep the scratch file");
  spintune::CheckEveryNumber(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return spintune::ExitForParseError(app, e, "spintune-ioload");
  }
  o.file_bytes = file_mb << 20;
  o.duration = duration;
  std::atomic<bool> stop{false};
  spintune::SignalWaiter signals([&stop](int) { stop = true; });
  auto r = spintune::RunIoLoad(o, &stop);
  if (!r.ok()) {
    std::cerr << "spintune-ioload: " << r.status().message() << "\n";
    return absl::IsInvalidArgument(r.status()) ? 2 : 1;
  }
  std::cout << absl::StrFormat(
      "ioload: %d reads, %d writes, %d fsyncs, %.1f MiB in %.2f s (%.0f requests/s)\n", r->reads,
      r->writes, r->fsyncs, static_cast<double>(r->bytes) / (1 << 20), r->seconds,
      static_cast<double>(r->reads + r->writes + r->fsyncs) / r->seconds);
  return 0;
}
