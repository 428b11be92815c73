// spintune-ioload: the bundled disk load of `make demo-live` and of the
// live tests: O_DIRECT reads and writes of several sizes plus fsyncs on a
// scratch file (agent/io_load.h).
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "agent/io_load.h"
#include "common/process_setup.h"
#include "common/signal_waiter.h"
#include "common/version.h"

int main(int argc, char** argv) {
  spintune::SetUpProcess();  // before any thread starts
  spintune::IoLoadOptions o;
  double seconds = 5;
  uint64_t file_mb = 64;
  CLI::App app{"spintune-ioload: O_DIRECT reads and writes of several sizes plus fsyncs on a "
               "scratch file, for measuring a disk with spintune-agent --source tracefs."};
  app.footer("Examples:\n  spintune-ioload --file /var/tmp/load.bin --duration 10 --threads 4\n"
             "Exit codes: 0 ok, 1 I/O failure, 2 usage.");
  app.set_version_flag("--version", spintune::Version());
  app.add_option("--file", o.path, "Scratch file (created; removed afterwards)")
      ->capture_default_str();
  app.add_option("--file-mb", file_mb, "Scratch file size in MiB")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--sizes", o.sizes, "Request sizes in bytes (multiples of 4096)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--write-share", o.write_share, "Share of writes")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--fsync-every", o.fsync_every, "Writes per fdatasync (0: never)")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "Threads issuing requests")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--rate", o.requests_per_second, "Requests per second, all threads (0: max)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--duration", seconds, "Seconds to run")
      ->check(CLI::Range(0.01, 86400.0))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Random seed")->capture_default_str();
  app.add_flag("--keep", o.keep_file, "Keep the scratch file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  o.file_bytes = file_mb << 20;
  o.duration = absl::Seconds(seconds);
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
